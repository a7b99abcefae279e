package skstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// metaTable holds the metadata declared for non-standard paths and how much of it the server
// has confirmed; metaKick wakes its reconciler. Guarded by Stream.mu.
type metaTable struct {
	metas          []*metaDecl
	metaReconciled int
	metaKick       chan struct{}
}

type metaDecl struct {
	path       string
	body       []byte // {"value":{...}}
	reconciled bool
	tried      *session // reconciliation already tried on this connection
}

// DeclareMeta declares the metadata of a non-standard path: meta must encode to a JSON object.
// A period above zero adds `timeout` = 2.5 × period in seconds. On every connect the device
// GETs the server's copy and PUTs its own only when the server has none (404); otherwise the
// server's copy wins. Declaring a path again replaces its declaration.
func (s *Stream) DeclareMeta(path string, meta any, period time.Duration) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if period < 0 {
		return fmt.Errorf("%w: negative period", ErrInvalidArgument)
	}
	raw, err := encodeValue(meta)
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: meta for %q is not a JSON object", ErrInvalidArgument, path)
	}
	if period > 0 {
		obj["timeout"] = json.RawMessage(strconv.FormatFloat(2.5*period.Seconds(), 'g', -1, 64))
	}
	body, err := json.Marshal(map[string]any{"value": obj})
	if err != nil {
		return fmt.Errorf("%w: meta for %q: %v", ErrInvalidArgument, path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var d *metaDecl
	for _, m := range s.metas {
		if m.path == path {
			d = m
		}
	}
	if d == nil {
		if len(s.metas) >= MaxMetaDeclarations {
			return fmt.Errorf("%w: %d meta declarations", ErrLimit, MaxMetaDeclarations)
		}
		d = &metaDecl{path: path}
		s.metas = append(s.metas, d)
	}
	if d.reconciled {
		s.metaReconciled--
	}
	d.body, d.reconciled, d.tried = body, false, nil
	if s.connected && s.opts.HTTP != nil {
		select {
		case s.metaKick <- struct{}{}:
		default:
		}
	}
	return nil
}

// metaLoop reconciles the declared metadata for one connection, then waits for new declarations.
func (s *Stream) metaLoop(sess *session) {
	defer sess.wg.Done()
	for {
		s.mu.Lock()
		if s.sess != sess {
			s.mu.Unlock()
			return
		}
		type job struct {
			d    *metaDecl
			body []byte
		}
		var todo []job
		for _, d := range s.metas {
			if !d.reconciled && d.tried != sess {
				d.tried = sess
				todo = append(todo, job{d, d.body})
			}
		}
		s.mu.Unlock()
		for _, j := range todo {
			ok := s.reconcile(sess.ctx, j.d.path, j.body)
			s.mu.Lock()
			if ok && s.sess == sess && !j.d.reconciled && string(j.d.body) == string(j.body) {
				j.d.reconciled = true
				s.metaReconciled++
			}
			s.mu.Unlock()
		}
		if len(todo) > 0 {
			s.noteStatus()
		}
		select {
		case <-sess.ctx.Done():
			return
		case <-s.metaKick:
		}
	}
}

func (s *Stream) reconcile(ctx context.Context, path string, body []byte) bool {
	u := metaURL(path)
	st, _, err := s.opts.HTTP(ctx, http.MethodGet, u, nil)
	if err != nil {
		s.log.Warn("signal k stream: meta GET failed", "path", path, "err", err)
		return false
	}
	switch st {
	case http.StatusOK:
		return true // the server's copy wins
	case http.StatusNotFound:
	default:
		s.log.Warn("signal k stream: meta GET answered", "path", path, "status", st)
		return false
	}
	st, _, err = s.opts.HTTP(ctx, http.MethodPut, u, body)
	if err != nil || st < 200 || st > 299 {
		s.log.Warn("signal k stream: meta PUT failed", "path", path, "status", st, "err", err)
		return false
	}
	return true
}
