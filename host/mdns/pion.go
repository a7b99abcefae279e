package mdns

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/pion/logging"
	pion "github.com/pion/mdns/v2"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/net/ipv4"
)

// startHostAnswerer runs the multicast plumbing that answers A questions for `<host>.local`
// on the given interfaces, on its own shared socket on the mDNS port. AAAA questions are the
// responder's: the plumbing, on an IPv4 socket, finds no IPv6 address to answer with.
func startHostAnswerer(host string, ifs []iface, log *slog.Logger) (*pion.Conn, error) {
	conn, err := listenReuse(context.Background())
	if err != nil {
		return nil, err
	}
	netIfs := make([]net.Interface, 0, len(ifs))
	loop := false
	for _, f := range ifs {
		netIfs = append(netIfs, f.netIf)
		loop = loop || f.Loopback
	}
	pc, err := pion.NewServer(ipv4.NewPacketConn(conn), nil,
		pion.WithName(host),
		pion.WithLocalNames(host+".local"),
		pion.WithInterfaces(netIfs...),
		pion.WithIncludeLoopback(loop),
		// Service records, probing and announcements are this package's; the plumbing only
		// answers for the host name.
		pion.WithRecordTypes(dnsmessage.TypeA),
		pion.WithResponseTTL(ttlHost),
		pion.WithCacheRefresh(false),
		pion.WithLoggerFactory(slogFactory{log}),
	)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("mdns: start host answerer for %s.local: %w", host, err)
	}
	return pc, nil
}

// slogFactory routes the plumbing's log lines to slog. Its warnings are mostly about packets
// from the network (malformed, unexpected), so they go to Debug: a noisy LAN must not flood
// the device's log.
type slogFactory struct{ log *slog.Logger }

func (f slogFactory) NewLogger(scope string) logging.LeveledLogger {
	return slogLeveled{f.log.With("scope", "pion-"+scope)}
}

type slogLeveled struct{ log *slog.Logger }

func (l slogLeveled) Trace(string)                     {}
func (l slogLeveled) Tracef(string, ...any)            {}
func (l slogLeveled) Debug(string)                     {}
func (l slogLeveled) Debugf(string, ...any)            {}
func (l slogLeveled) Info(msg string)                  { l.log.Debug(msg) }
func (l slogLeveled) Infof(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l slogLeveled) Warn(msg string)                  { l.log.Debug(msg) }
func (l slogLeveled) Warnf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l slogLeveled) Error(msg string)                 { l.log.Warn(msg) }
func (l slogLeveled) Errorf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...))
}
