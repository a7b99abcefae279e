// Package build holds the firmware's identity and its build options. The options are the spec's
// `CONFIG_DEV_*` switches: each has a compiled-in default that a release build sets with
// `-ldflags "-X devhost/host/build.AuthRequired=y"` and that `devhost` start flags may override.
package build

import "runtime"

// App is the application (project) name.
const App = "devhost"

// Version is the build version, set by the Makefile from the repository's VERSION file.
var Version = "0.1.0-dev"

// Target is the platform target an image is built for (the simulated board's chip by default);
// OTA manifests name it per build.
var Target = "esp32s3"

// Time is when the image was built (RFC 3339), set by the Makefile; empty in a plain go build.
var Time = ""

// Build options, "y" or "n".
var (
	AuthRequired   = "n" // HTTPD_AUTH_REQUIRED: no key means 403 auth_unconfigured outside the portal
	DebugCrash     = "n" // HTTPD_DEBUG_CRASH: POST /system/crash panics on purpose
	HealthWatchdog = "y" // CORE_HEALTH_WATCHDOG: the health policy may restart the device
	PortalRecovery = "y" // HTTPD_PORTAL_RECOVERY: the lost-key power-cycle recovery path
)

// On reports whether a build option string is set.
func On(opt string) bool { return opt == "y" || opt == "1" || opt == "true" }

// PlatformVersion is the platform SDK version reported as `idf_version`: the Go toolchain the
// firmware was built with.
func PlatformVersion() string { return runtime.Version() }
