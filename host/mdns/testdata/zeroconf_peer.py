"""An independent mDNS peer for the interop tests, built on python3-zeroconf.

Usage (one JSON object per line on stdout; a line on stdin ends the command):
  zeroconf_peer.py register TYPE INSTANCE PORT HOST ADDR [KEY=VALUE ...]
  zeroconf_peer.py browse TYPE
  zeroconf_peer.py latency TYPE INSTANCE COUNT
latency resolves INSTANCE COUNT times with an empty cache each time and reports how long
each resolution took, in milliseconds, from the first query sent to the last record needed.
It asks QM questions: every peer here shares 127.0.0.1:5353 (SO_REUSEPORT), so a unicast
answer to a QU question reaches only one of the sockets, maybe not this one; on a real LAN
each host has its own.
TYPE is like _dev._tcp. It works on 127.0.0.1 only.
"""
import json
import socket
import sys
import threading
import time

from zeroconf import DNSQuestionType, IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf


_out_lock = threading.Lock()


def out(obj):
    # zeroconf calls back on its own threads: print() writes the text and the newline
    # separately, so two events could share a line. One write under a lock keeps a line whole.
    line = json.dumps(obj) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def describe(zc, service_type, name, event):
    info = zc.get_service_info(service_type, name, timeout=3000)
    if info is None:
        out({"event": "unresolved", "name": name})
        return
    txt = {}
    for k, v in info.properties.items():
        txt[k.decode()] = None if v is None else v.decode()
    out({"event": event, "name": name, "port": info.port, "server": info.server,
         "addresses": info.parsed_addresses(), "txt": txt})


def main():
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    try:
        if sys.argv[1] == "register":
            typ, inst, port, host, addr = sys.argv[2:7]
            props = dict(kv.split("=", 1) for kv in sys.argv[7:])
            info = ServiceInfo(typ + ".local.", inst + "." + typ + ".local.",
                               addresses=[socket.inet_aton(addr)], port=int(port),
                               properties=props, server=host + ".local.")
            zc.register_service(info)
            out({"event": "registered", "name": info.name})
            sys.stdin.readline()
            zc.unregister_service(info)
            out({"event": "unregistered", "name": info.name})
        elif sys.argv[1] == "browse":
            typ = sys.argv[2] + ".local."

            def handler(zeroconf, service_type, name, state_change):
                if state_change is ServiceStateChange.Removed:
                    out({"event": "removed", "name": name})
                else:
                    describe(zeroconf, service_type, name, state_change.name.lower())

            ServiceBrowser(zc, typ, handlers=[handler])
            out({"event": "browsing"})
            sys.stdin.readline()
        elif sys.argv[1] == "latency":
            typ, inst, count = sys.argv[2] + ".local.", sys.argv[3], int(sys.argv[4])
            name = inst + "." + typ
            times = []
            for _ in range(count):
                # Forget every record so the resolution asks the network.
                zc.cache.cache.clear()
                zc.cache.service_cache.clear()
                info = ServiceInfo(typ, name)
                start = time.monotonic()
                if not info.request(zc, 3000, question_type=DNSQuestionType.QM):
                    out({"event": "unresolved", "name": name})
                    return
                times.append((time.monotonic() - start) * 1000.0)
            out({"event": "latency", "name": name, "ms": times, "server": info.server,
                 "addresses": info.parsed_addresses(), "port": info.port})
        else:
            raise SystemExit("unknown command " + sys.argv[1])
    finally:
        zc.close()


if __name__ == "__main__":
    main()
