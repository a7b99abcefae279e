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

// decodeSource decodes an sk_publish_src message, one group or more, as decode does an
// sk_publish one. The groups' values are valid until the next decode (release).
func (p *publisher) decodeSource(b []byte) ([]abi.SourceGroup, error) {
	vals, groups, err := p.paths.AppendDecodedSourceGroups(p.vals[:0], p.groups[:0], b, abi.MaxValuesPerCall)
	p.groups = groups
	if err != nil {
		return nil, err
	}
	p.vals = vals
	return groups, nil
}

// fnSKPublishSrc publishes values with their source, for the own vessel (empty context) or
// another context, within the instance's caps on live contexts and live sources. A message
// carries the groups of several sources; a group refused by a cap ends the call there (the
// groups before it are published) with -4.
func fnSKPublishSrc(s *session, st []uint64) int32 {
	b, e := s.view(p32(st, 0), p32(st, 1))
	if e != 0 {
		return int32(e)
	}
	groups, err := s.pub.decodeSource(b)
	if err != nil {
		s.p.m.log.Debug("sk_publish_src refused", "plugin", s.p.id, "err", err)
		return int32(abi.ErrInvalid)
	}
	defer s.pub.releaseGroups()
	if s.p.m.opts.SignalK == nil {
		return int32(abi.ErrState)
	}
	now := s.p.m.clk.Now()
	for _, g := range groups {
		src, c := g.Source, g.Context
		key := sourceKey{src.Type, src.Src, src.Instance}
		// Both caps are checked before either records: a group refused for its context
		// leaves its source as it was, and the reverse.
		switch {
		case !s.srcs.room(key, now):
			s.p.m.log.Warn("sk_publish_src: too many sources", "plugin", s.p.id, "src", src.Src, "live", abi.MaxContexts)
			return int32(abi.ErrLimit)
		case c != "" && !s.ctxs.room(c, now):
			s.p.m.log.Warn("sk_publish_src: too many contexts", "plugin", s.p.id, "context", c, "live", abi.MaxContexts)
			return int32(abi.ErrLimit)
		}
		s.srcs.admit(key, now)
		if c != "" {
			s.ctxs.admit(c, now)
		}
		if err := s.p.m.opts.SignalK.PublishSource(sktypes.Source(src), c, s.pub.convertOut(g.Values)...); err != nil {
			return int32(errno(err, abi.ErrState))
		}
	}
	return 0
}
