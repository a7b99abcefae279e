package sktls

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"devhost/host/board"
	"devhost/host/health"

	"github.com/jonboulle/clockwork"
)

// MinHandshakeBlock is the largest free internal block a handshake needs. The embedded TLS
// stack allocates its incoming record buffer (16 KiB of payload plus header, MAC and padding)
// as one piece of internal RAM when the handshake starts; with no free block that large the
// handshake is deferred instead of failing half-way.
const MinHandshakeBlock = 17 * 1024

// DeferPoll is how often a deferred handshake looks at the memory figures again.
const DeferPoll = time.Second

// Reporter takes health conditions (*health.Registry fits).
type Reporter interface {
	Report(key string, state health.State, message string) error
}

// GateOptions configure a Gate. Zero values take the defaults.
type GateOptions struct {
	Clock clockwork.Clock
	// Memory gives the board's memory figures; nil means handshakes are never deferred.
	Memory func() board.Memory
	// Health receives tlsMemory; nil means it is not reported.
	Health   Reporter
	MinBlock int64
	Logger   *slog.Logger
}

// Gate lets one TLS handshake run at a time, device-wide: every TLS client of the device (the
// Signal K client, OTA downloads) shares one Gate. Before a handshake starts it also checks that
// the board has the contiguous internal RAM a handshake needs, and defers it (raising
// tlsMemory warn) while it does not.
type Gate struct {
	clock    clockwork.Clock
	memory   func() board.Memory
	health   Reporter
	minBlock int64
	log      *slog.Logger
	sem      chan struct{}
}

// NewGate builds a gate.
func NewGate(o GateOptions) *Gate {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.MinBlock <= 0 {
		o.MinBlock = MinHandshakeBlock
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{clock: o.Clock, memory: o.Memory, health: o.Health, minBlock: o.MinBlock, log: o.Logger, sem: make(chan struct{}, 1)}
}

// Acquire waits for the handshake slot and for enough contiguous memory, then returns the
// release function. It gives up when ctx ends.
func (g *Gate) Acquire(ctx context.Context) (func(), error) {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("sktls: waiting for the handshake slot: %w", context.Cause(ctx))
	}
	release := func() { <-g.sem }
	if err := g.waitMemory(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

func (g *Gate) waitMemory(ctx context.Context) error {
	if g.memory == nil {
		return nil
	}
	deferred := false
	for {
		largest := g.memory().LargestBlock
		if largest >= g.minBlock {
			if deferred {
				g.report(health.Normal, "")
				g.log.Info("deferred TLS handshake proceeds", "largest_block", largest)
			}
			return nil
		}
		if !deferred {
			deferred = true
			g.report(health.Warn, fmt.Sprintf("TLS handshake deferred: largest free internal block %d B, needs %d B", largest, g.minBlock))
			g.log.Warn("TLS handshake deferred for lack of contiguous internal RAM", "largest_block", largest, "needs", g.minBlock)
		}
		t := g.clock.NewTimer(DeferPoll)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			// The handshake did not happen; the condition stays until one proceeds, since the
			// memory shortage that deferred it is still there.
			return fmt.Errorf("sktls: handshake deferred for lack of memory: %w", context.Cause(ctx))
		}
	}
}

func (g *Gate) report(state health.State, msg string) {
	if g.health == nil {
		return
	}
	if err := g.health.Report(health.KeyTLSMemory, state, msg); err != nil {
		g.log.Warn("report tlsMemory", "err", err)
	}
}
