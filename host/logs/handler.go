package logs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Logger answers a logger whose records become lines with tag, filtered by the tag's level.
func (r *Ring) Logger(tag string) *slog.Logger {
	return slog.New(&handler{r: r, tag: tag})
}

// Handler answers the slog handler behind Logger, for callers that wrap handlers.
func (r *Ring) Handler(tag string) slog.Handler {
	return &handler{r: r, tag: tag}
}

// handler is immutable; WithAttrs and WithGroup derive new ones.
type handler struct {
	r      *Ring
	tag    string
	attrs  string // attributes of WithAttrs, already rendered
	prefix string // open groups as a dotted key prefix
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	return h.r.Enabled(h.tag, l)
}

func (h *handler) Handle(_ context.Context, rec slog.Record) error {
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], strings.TrimRight(rec.Message, "\r\n")...)
	b = append(b, h.attrs...)
	rec.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, h.prefix, a)
		return true
	})
	body := string(b)
	*bp = b
	bufPool.Put(bp)
	h.r.emit(rec.Level, h.tag, body)
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	b := []byte(h.attrs)
	for _, a := range as {
		b = appendAttr(b, h.prefix, a)
	}
	nh := *h
	nh.attrs = string(b)
	return &nh
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	nh := *h
	nh.prefix = h.prefix + name + "."
	return &nh
}

// Printf stores a printf-style line with a level letter (E W I D V; anything else is I),
// filtered like a slog record of that level.
func (r *Ring) Printf(level byte, tag, format string, args ...any) {
	l := letterLevel(level)
	if !r.Enabled(tag, l) {
		return
	}
	r.emit(l, tag, strings.TrimRight(fmt.Sprintf(format, args...), "\r\n"))
}
