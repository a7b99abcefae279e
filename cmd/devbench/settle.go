package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// pluginsPath lists the installed plugins and their states.
const pluginsPath = "/api/v1/plugins"

// pluginsSettled tells from a GET /api/v1/plugins answer whether every plugin is past its
// loading (verified, compiled and started, or failed): a plugin compiling at boot holds the
// compiler's working memory, and the idle figure is the device at rest, plugins included.
func pluginsSettled(body []byte) (bool, error) {
	var list struct {
		Plugins *[]struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, fmt.Errorf("decoding %s: %w", pluginsPath, err)
	}
	if list.Plugins == nil {
		return false, fmt.Errorf("%s: no plugins list in %.200q", pluginsPath, body)
	}
	for _, p := range *list.Plugins {
		if p.State == "" {
			return false, fmt.Errorf("%s: plugin %q without a state", pluginsPath, p.ID)
		}
		if p.State == "loading" {
			return false, nil
		}
	}
	return true, nil
}

// waitPluginsSettled polls the device's plugin list every poll until no plugin is loading,
// or until ctx ends.
func waitPluginsSettled(ctx context.Context, client *http.Client, base, key string, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		resp, err := request(ctx, client, http.MethodGet, base+pluginsPath, key, nil)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", pluginsPath, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", pluginsPath, resp.StatusCode)
		}
		ok, err := pluginsSettled(body)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the plugins to start: %w", ctx.Err())
		case <-t.C:
		}
	}
}
