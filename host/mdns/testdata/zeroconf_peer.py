"""An independent mDNS peer for the interop tests, built on python3-zeroconf.

Usage (one JSON object per line on stdout; a line on stdin ends the command):
  zeroconf_peer.py register TYPE INSTANCE PORT HOST ADDR [KEY=VALUE ...]
  zeroconf_peer.py browse TYPE
TYPE is like _dev._tcp. It works on 127.0.0.1 only.
"""
import json
import socket
import sys

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf


def out(obj):
    print(json.dumps(obj), flush=True)


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
        else:
            raise SystemExit("unknown command " + sys.argv[1])
    finally:
        zc.close()


if __name__ == "__main__":
    main()
