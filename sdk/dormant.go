package sdk

import "devhost/abi"

// Wake is what ends a plugin's dormancy (abi.Wake): configuration values of the plugin's
// namespace it sleeps with, a press of the button, the WiFi station with no network.
type Wake = abi.Wake

// Dormant asks the host to close this instance once it is idle and to start a fresh one
// (OnInit again) when a condition of w holds; a request to the plugin's routes wakes it
// too. Meanwhile the plugin costs (almost) nothing: its namespace stays registered and its
// values stay readable and writable through the API. Call it when the plugin's work is off,
// e.g. at the end of OnInit and OnConfig while an "enabled" key is false:
//
//	sdk.Dormant(sdk.Wake{Config: map[string]json.RawMessage{"enabled": json.RawMessage("false")}})
//
// An event that meets a condition before the instance closed withdraws the request (the
// handler then decides afresh); Awake withdraws it too. Needs ABI 1.4 (abi_minor 4); Button
// needs button and WiFiUnconfigured wifi.prov.
func Dormant(w Wake) error {
	b, err := abi.EncodeWake(w)
	if err != nil {
		return err
	}
	return hostErr("dormant", callIn(abi.FnDormant, b))
}

// Awake withdraws this instance's Dormant request.
func Awake() error { return hostErr("dormant", callIn(abi.FnDormant, nil)) }
