package ota

import (
	"errors"
	"net/http"
	"net/url"

	"devhost/host/api"
)

// Routes are the spec's firmware update endpoints (all protected):
//
//	GET  /ota/status    the Status document
//	POST /ota/check     202 {status: checking}
//	POST /ota           {url?}: 202 {status: downloading} for a URL, {status: checking} for the manifest
//	POST /ota/confirm   200 {status: confirmed} (also when it already was)
//	POST /ota/rollback  202 {status: rolling_back}
//
// Refusals: 409 `busy` while a check or install runs or an image is ready; 409 `conflict`
// while the running image is unconfirmed (check, install) or when the other slot holds
// nothing to roll back to; 503 `restarting` once the update reboot is armed; 400 `validation`
// for a body or URL that is not an http(s) URL.
func (u *Updater) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/ota/status", Handler: api.Document(u.Status), Doc: &api.Doc{Summary: "Firmware update status",
			Description: "The running image (version, slot, confirmed, rolled_back), the other slot's version, the update state, progress 0-100 (null when idle), the last error and the newer build available, if any.",
			Response:    "{running: {version, slot, confirmed, rolled_back}, other_version, state, progress, error, available, ...}"}},
		{Method: http.MethodPost, Path: "/ota/check", Handler: u.handleCheck, NoBody: true, Doc: &api.Doc{Summary: "Check for a newer build",
			Description: "Fetches the manifest (ota.manifest_src: a URL or a path on the Signal K server) now. 409 busy while a check or install runs; 409 conflict while the running image is unconfirmed.",
			Status:      http.StatusAccepted, Response: "{status: checking}"}},
		{Method: http.MethodPost, Path: "/ota", Handler: u.handleInstall, NoBody: true, Doc: &api.Doc{Summary: "Install a firmware image",
			Description: "With a url, downloads that signed image into the other slot, verifies it and reboots into it; without one, checks the manifest and installs its newer build. 400 validation for a URL that is not http(s); 409 busy or conflict as for a check.",
			Request:     "{url?: string}", Status: http.StatusAccepted, Response: "{status: downloading | checking}"}},
		{Method: http.MethodPost, Path: "/ota/confirm", Handler: u.handleConfirm, NoBody: true, Doc: &api.Doc{Summary: "Confirm the running image",
			Description: "Marks the running image valid so no reset rolls it back; a no-op on a confirmed image.",
			Response:    "{status: confirmed}"}},
		{Method: http.MethodPost, Path: "/ota/rollback", Handler: u.handleRollback, NoBody: true, Doc: &api.Doc{Summary: "Roll back to the other slot",
			Description: "Reboots into the image in the other slot. 409 conflict when it holds nothing valid to roll back to.",
			Status:      http.StatusAccepted, Response: "{status: rolling_back}"}},
	}
}

func writeRefusal(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBusy):
		api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeBusy, "%v", err))
	case errors.Is(err, errUnconfirmed), errors.Is(err, errNoRollback):
		api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err))
	case errors.Is(err, errRestarting):
		api.WriteErr(w, api.Errorf(http.StatusServiceUnavailable, api.CodeRestarting, "%v", err))
	case errors.Is(err, errNotRunning):
		api.WriteErr(w, api.Errorf(http.StatusServiceUnavailable, api.CodeBusy, "%v", err))
	default:
		api.WriteErr(w, err)
	}
}

func (u *Updater) handleCheck(w http.ResponseWriter, _ *http.Request) {
	if err := u.startCheck(false); err != nil {
		writeRefusal(w, err)
		return
	}
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": StateChecking})
}

func (u *Updater) handleInstall(w http.ResponseWriter, r *http.Request) {
	b, err := api.ReadBody(r)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	var req struct {
		URL *string `json:"url"`
	}
	if len(b) > 0 {
		if err := api.Unmarshal(b, &req); err != nil {
			api.WriteErr(w, err)
			return
		}
	}
	if req.URL == nil {
		// No URL: the manifest's newest build, checked now.
		if err := u.startCheck(true); err != nil {
			writeRefusal(w, err)
			return
		}
		api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": StateChecking})
		return
	}
	pu, err := url.Parse(*req.URL)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		api.WriteErr(w, api.Validation("url", "an absolute http or https URL is required"))
		return
	}
	if err := u.startInstall(pu.String()); err != nil {
		writeRefusal(w, err)
		return
	}
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": StateDownloading})
}

func (u *Updater) handleConfirm(w http.ResponseWriter, _ *http.Request) {
	if err := u.confirm("POST /ota/confirm"); err != nil {
		api.WriteErr(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "confirmed"})
}

func (u *Updater) handleRollback(w http.ResponseWriter, _ *http.Request) {
	if err := u.rollback("POST /ota/rollback"); err != nil {
		writeRefusal(w, err)
		return
	}
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "rolling_back"})
}
