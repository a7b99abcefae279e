package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"devhost/host/plugin/trust"
)

// pluginsPath lists the installed plugins and their states.
const pluginsPath = "/api/v1/plugins"

// pluginsSettled tells from a GET /api/v1/plugins answer whether the device's carried
// bundles have been offered (bundled_pending false: the device offers them after it answers)
// and every plugin is past its loading (verified, compiled and started, or failed): a plugin
// compiling at boot holds the compiler's working memory, and the idle figure is the device at
// rest, plugins included. The summary lists each plugin as id=state ("none" without plugins,
// "bundled pending" added while the offer runs), for the report.
func pluginsSettled(body []byte) (settled bool, summary string, err error) {
	var list struct {
		Plugins *[]struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"plugins"`
		BundledPending bool `json:"bundled_pending"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, "", fmt.Errorf("decoding %s: %w", pluginsPath, err)
	}
	if list.Plugins == nil {
		return false, "", fmt.Errorf("%s: no plugins list in %.200q", pluginsPath, body)
	}
	settled = !list.BundledPending
	states := make([]string, 0, len(*list.Plugins)+1)
	for _, p := range *list.Plugins {
		if p.State == "" {
			return false, "", fmt.Errorf("%s: plugin %q without a state", pluginsPath, p.ID)
		}
		if p.State == "loading" {
			settled = false
		}
		states = append(states, p.ID+"="+p.State)
	}
	if list.BundledPending {
		states = append(states, "bundled pending")
	}
	if len(states) == 0 {
		return settled, "none", nil
	}
	return settled, strings.Join(states, " "), nil
}

// waitPluginsSettled polls the device's plugin list every poll until no plugin is loading,
// or until ctx ends, and returns pluginsSettled's summary.
func waitPluginsSettled(ctx context.Context, client *http.Client, base, key string, poll time.Duration) (string, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		resp, err := request(ctx, client, http.MethodGet, base+pluginsPath, key, nil)
		if err != nil {
			return "", err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", pluginsPath, err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s answered %d", pluginsPath, resp.StatusCode)
		}
		ok, summary, err := pluginsSettled(body)
		if err != nil || ok {
			return summary, err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the plugins to start (%s): %w", summary, ctx.Err())
		case <-t.C:
		}
	}
}

// deviceKeyDir is the folder of the development signing key the device under test trusts
// (its DEVHOST_KEYS). `make build` signs the bundled plugins with the user's development key,
// and the device `make run` starts trusts that key and runs them: when that key exists, the
// bench's device uses it too (the device only reads an existing key), so the figures are
// those of the device as built, bundled plugins included. Without one, a folder in tmp keeps
// the key the device creates out of the user's configuration; bundles are then refused.
func deviceKeyDir(tmp string) (dir string, shared bool) {
	if d, err := trust.DevKeyDir(); err == nil {
		if _, err := os.Stat(filepath.Join(d, trust.DevPrivateFile)); err == nil {
			return d, true
		}
	}
	return filepath.Join(tmp, "keys"), false
}
