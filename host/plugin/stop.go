package plugin

import (
	"context"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"devhost/host/plugin/stackguard"
)

// instanceKey carries the instance a call runs on, for stopListener.
type instanceKey struct{}

// requestStop makes the instance's running code trap at its next loop iteration or function
// entry: its call's context ended (the time limit or a stop). The flag stays set: an instance
// whose call was cut off is never called again. Either this or stopListener's capture comes
// second and sets the flag, whichever order the two goroutines run in.
func (in *instance) requestStop() {
	in.stopAsked.Store(true)

	if g := in.stopFlag.Load(); g != nil {
		(*g).Set(1)
	}
}

// stopListener finds an instance's stop flag and module. extism exposes neither, so the
// host listens to the entry of the first functions a call runs (the guest runtime's
// _initialize and stackguard's getter, which the first call runs before anything else) and
// takes the flag from the module those are called in. Other functions have no listener and
// run at full speed.
type stopListener struct{}

func (stopListener) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	for _, name := range def.ExportNames() {
		if name == "_initialize" || name == stackguard.Getter {
			return stopCapture{}
		}
	}
	return nil
}

type stopCapture struct{}

func (stopCapture) Before(ctx context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok || in.stopFlag.Load() != nil {
		return
	}
	in.module = mod
	g, ok := mod.ExportedGlobal(stackguard.Stop).(api.MutableGlobal)
	if !ok {
		return
	}
	in.stopFlag.Store(&g)
	if in.stopAsked.Load() {
		g.Set(1)
	}
}

func (stopCapture) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (stopCapture) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}
