package skstream

// message is one outbound frame waiting in the ring; seq orders raw frames and deltas by age.
type message struct {
	b   []byte
	seq uint64
}

// fifo is a slice-backed queue with cheap push, pop and push-front.
type fifo struct {
	items []message
	head  int
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) push(m message) { q.items = append(q.items, m) }

func (q *fifo) front() *message { return &q.items[q.head] }

func (q *fifo) pop() message {
	m := q.items[q.head]
	q.items[q.head] = message{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return m
}

func (q *fifo) pushFront(m message) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = m
		return
	}
	q.items = append(q.items, message{})
	copy(q.items[1:], q.items)
	q.items[0] = m
}

// ring holds raw frames and delta messages under one budget of messages and bytes. Raw frames
// leave first; when over budget the oldest message of either kind is dropped.
type ring struct {
	raw, delta fifo
	bytes      int
	seq        uint64
}

func (r *ring) len() int { return r.raw.len() + r.delta.len() }

func (r *ring) add(raw bool, b []byte) {
	r.seq++
	m := message{b: b, seq: r.seq}
	if raw {
		r.raw.push(m)
	} else {
		r.delta.push(m)
	}
	r.bytes += len(b)
}

// putBack returns a message that could not be written to the front of its queue.
func (r *ring) putBack(raw bool, m message) {
	if raw {
		r.raw.pushFront(m)
	} else {
		r.delta.pushFront(m)
	}
	r.bytes += len(m.b)
}

func (r *ring) take(raw bool) message {
	var m message
	if raw {
		m = r.raw.pop()
	} else {
		m = r.delta.pop()
	}
	r.bytes -= len(m.b)
	return m
}

// trim drops the oldest messages until the ring fits maxMsgs and maxBytes, keeping at least
// keep messages, and hands each dropped delta's buffer to spare (nil: none). It returns how
// many were dropped.
func (r *ring) trim(maxMsgs, maxBytes, keep int, spare func([]byte)) int {
	dropped := 0
	for r.len() > keep && (r.len() > maxMsgs || r.bytes > maxBytes) {
		raw := r.delta.len() == 0 || (r.raw.len() > 0 && r.raw.front().seq < r.delta.front().seq)
		m := r.take(raw)
		if !raw && spare != nil {
			spare(m.b)
		}
		dropped++
	}
	return dropped
}
