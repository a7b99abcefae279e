package plugin

import (
	"devhost/abi"
	sktypes "devhost/host/sk"
)

// Values with a source of their own (ABI 1.5, sk_publish_src): a gateway plugin relays what
// other devices measured with each sender's source, so that the server keeps two GPS
// receivers apart. The decoding shares sk_publish's buffers and path table; the flood caps are
// sk_publish_ctx's live contexts, and as many live sources.

// sourceKey is a source as the flood cap counts it: its PGN varies from message to message of
// one sender and does not make another source.
type sourceKey struct{ typ, src, instance string }

// decodeSource decodes an sk_publish_src message as decode does an sk_publish one, with its
// source and context.
func (p *publisher) decodeSource(b []byte) (abi.Source, string, []sktypes.Value, error) {
	src, c, vals, err := p.paths.AppendDecodedSourceValues(p.vals[:0], b, abi.MaxValuesPerCall)
	if err != nil {
		return abi.Source{}, "", nil, err
	}
	return src, c, p.convert(vals), nil
}

// fnSKPublishSrc publishes values with their source, for the own vessel (empty context) or
// another context, within the instance's caps on live contexts and live sources.
func fnSKPublishSrc(s *session, st []uint64) int32 {
	var (
		src abi.Source
		c   string
		out []sktypes.Value
		err error
	)
	if b, e := s.view(p32(st, 0), p32(st, 1)); e != 0 {
		return int32(e)
	} else if src, c, out, err = s.pub.decodeSource(b); err != nil {
		s.p.m.log.Debug("sk_publish_src refused", "plugin", s.p.id, "err", err)
		return int32(abi.ErrInvalid)
	}
	defer s.pub.release()
	if s.p.m.opts.SignalK == nil {
		return int32(abi.ErrState)
	}
	now := s.p.m.clk.Now()
	switch {
	case !s.srcs.admit(sourceKey{src.Type, src.Src, src.Instance}, now):
		s.p.m.log.Warn("sk_publish_src: too many sources", "plugin", s.p.id, "src", src.Src, "live", abi.MaxContexts)
		return int32(abi.ErrLimit)
	case c != "" && !s.ctxs.admit(c, now):
		s.p.m.log.Warn("sk_publish_src: too many contexts", "plugin", s.p.id, "context", c, "live", abi.MaxContexts)
		return int32(abi.ErrLimit)
	}
	if err := s.p.m.opts.SignalK.PublishSource(sktypes.Source(src), c, out...); err != nil {
		return int32(errno(err, abi.ErrState))
	}
	return 0
}
