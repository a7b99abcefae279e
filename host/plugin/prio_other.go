//go:build !linux

package plugin

// lowerWorkerPriority does nothing where threads have no priority of their own.
func lowerWorkerPriority() {}
