package board

import "sync"

// Callbacks is a set of subscribed functions of type F. Each subscription is keyed by the address
// of its own copy of the function, so one function subscribed twice is two entries, each
// cancelled alone. The owner's lock guards the set; the owner calls what list answers after
// releasing that lock, so a callback may call back into its owner. host/socketcan keeps its
// receivers the same way.
type Callbacks[F any] map[*F]struct{}

// Subscribe adds fn to *set under mu and answers the cancel that removes it.
func Subscribe[F any](mu *sync.Mutex, set *Callbacks[F], fn F) (cancel func()) {
	key := &fn
	mu.Lock()
	if *set == nil {
		*set = Callbacks[F]{}
	}
	(*set)[key] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(*set, key)
		mu.Unlock()
	}
}

// List answers the subscribed functions; the caller holds the owner's lock.
func (c Callbacks[F]) List() []F {
	fns := make([]F, 0, len(c))
	for fn := range c {
		fns = append(fns, *fn)
	}
	return fns
}
