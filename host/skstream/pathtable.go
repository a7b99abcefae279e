package skstream

import "strings"

// pathTable finds a path's entry in its group's open message. It outlives the message: a
// path published before is one map lookup, with no insert and no second path check, where a
// map rebuilt for every message cost an insert per value and a clear per message (the
// device's producers publish the same few hundred paths over and over). A slot belongs to
// the message whose generation it carries; any other generation means the path is not in the
// open message yet.
type pathTable struct {
	slot  map[string]int32 // index into slots; a path in it passed checkPath
	slots []pathSlot
	gen   uint64 // the open message's generation, counted up when a message is closed
}

// pathSlot is where a path's value sits: entries[i] of the message of generation gen.
type pathSlot struct {
	gen uint64
	i   int32
}

// maxKnownPaths bounds a table: one that holds more is emptied before the next message's
// first value, so a producer of ever new paths costs at most this many paths (and those of one
// message) of memory, and only that producer pays for the rebuilding.
const maxKnownPaths = 4096

// noSlot is the slot index of a value that has no path (the members of a context's root):
// such values are all kept.
const noSlot = -1

func newPathTable() pathTable { return pathTable{slot: make(map[string]int32)} }

// lookup answers the slot of a known path. A table over its bound is emptied here, while its
// group's message is empty (open says it is not), so that no slot index handed out for the
// open message goes stale.
func (t *pathTable) lookup(path string, open bool) (int32, bool) {
	if !open && len(t.slots) > maxKnownPaths {
		t.reset()
	}
	k, ok := t.slot[path]
	return k, ok
}

// add gives a checked path a slot that is in no message yet. The table keeps its own copy
// of the path, so that it holds on to no caller's larger string.
func (t *pathTable) add(path string) int32 {
	k := int32(len(t.slots))
	t.slots = append(t.slots, pathSlot{gen: t.gen - 1})
	t.slot[strings.Clone(path)] = k
	return k
}

// current is the index in the open message's entries of the path of slot k, if it is there.
func (t *pathTable) current(k int32) (int, bool) {
	if k == noSlot || t.slots[k].gen != t.gen {
		return 0, false
	}
	return int(t.slots[k].i), true
}

// place records that the path of slot k is entries[i] of the open message.
func (t *pathTable) place(k int32, i int) {
	if k != noSlot {
		t.slots[k] = pathSlot{gen: t.gen, i: int32(i)}
	}
}

// next starts a new message: every slot's place becomes stale at once.
func (t *pathTable) next() { t.gen++ }

// reset forgets every path, for a group that is kept for another context or a table over its
// bound.
func (t *pathTable) reset() {
	clear(t.slot)
	t.slots = t.slots[:0]
	t.gen++
}
