// Command badns is a test plugin for namespace registration. At start it registers, in
// order: a malformed descriptor (want invalid argument; the host raises flowConfig), a
// descriptor naming f_other (permission denied), one naming the core namespace wifi
// (permission denied), a valid one (success), and the valid one again (conflict). It logs
// the outcomes as one line, "badns: malformed=<err> foreign=<err> core=<err> valid=<err>
// duplicate=<err>" (ok for success), and starts whatever the answers.
package main

import (
	"errors"
	"fmt"

	"devhost/sdk"
)

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range []error{sdk.ErrInvalid, sdk.ErrPermission, sdk.ErrConflict, sdk.ErrLimit, sdk.ErrState} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

func init() {
	sdk.Register(&sdk.Plugin{OnInit: func(sdk.Info) error {
		valid := sdk.Namespace{Version: 1, Title: "Bad namespaces", Keys: []sdk.Key{{Name: "n", Type: sdk.TypeInt, Default: 1}}}
		malformed := sdk.RegisterNamespaceJSON([]byte(`{"version":1,"title":"x","keys":[{"name":"bad name!","type":"int","default":1}]}`))
		foreign := sdk.RegisterNamespaceJSON([]byte(`{"namespace":"f_other","version":1,"title":"x","keys":[]}`))
		core := sdk.RegisterNamespaceJSON([]byte(`{"namespace":"wifi","version":1,"title":"x","keys":[]}`))
		ok := sdk.RegisterNamespace(valid)
		dup := sdk.RegisterNamespace(valid)
		return sdk.Log(sdk.LevelInfo, fmt.Sprintf("badns: malformed=%s foreign=%s core=%s valid=%s duplicate=%s",
			outcome(malformed), outcome(foreign), outcome(core), outcome(ok), outcome(dup)))
	}})
}

func main() {}
