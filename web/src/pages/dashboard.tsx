// The dashboard: identity, uptime, memory, health, time, network, Signal K, plugins and the
// update state. Documents with their own event (net, wifi, sk, plugins, ota) come from the
// stream; system info and health have no event of their own, so they are read again when the
// stream reports activity that can change them (log lines, which record every health
// condition change, configuration changes and network edges), never on a timer.

import { useEffect, useState } from 'preact/hooks';
import { getFirst, prefetched } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV, Problem, bytes, duration } from '../ui';
import type { HealthDoc } from './health';
import type { PluginList } from './plugins';

export interface Info {
  app?: string;
  version?: string;
  idf_version?: string;
  chip?: string;
  chip_revision?: number;
  cores?: number;
  uptime_s?: number;
  free_heap?: number;
  min_free_heap?: number;
  free_internal?: number;
  min_internal_free?: number;
  reset_reason?: string;
  config_storage_reset?: boolean;
  schema_etag?: string;
  ui_storage?: boolean;
  hardware?: { mac?: string; cpu_mhz?: number; flash_bytes?: number; ram_internal_bytes?: number; ram_psram_bytes?: number; features?: string[]; board?: string };
  time?: { synced?: boolean; source?: string; now?: number };
  last_reset?: Record<string, unknown> | null;
}

export interface NetStatus {
  up: boolean;
  iface: string;
  ip: string;
  gateway: string;
  hostname: string;
  id: string;
  rssi: number | null;
  up_s: number;
  up_count: number;
}

/** useUptime counts on from a read uptime without asking the device again. */
function useUptime(info?: Info): number | undefined {
  const [now, setNow] = useState(Date.now());
  const [base, setBase] = useState<[number, number] | undefined>();
  useEffect(() => {
    if (typeof info?.uptime_s === 'number') setBase([info.uptime_s, Date.now()]);
  }, [info]);
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return base ? base[0] + Math.max(0, Math.floor((now - base[1]) / 1000)) : undefined;
}

function Mem(p: { label: string; free?: number; min?: number; total?: number }) {
  if (p.free === undefined) return null;
  const pct = p.total ? Math.round((100 * p.free) / p.total) : undefined;
  return (
    <div class="mem">
      <div class="mem-l">
        <span>{p.label}</span>
        <span>
          {bytes(p.free)} free, low-water {bytes(p.min)}
        </span>
      </div>
      {pct !== undefined && (
        <div class="bar" role="meter" aria-label={`${p.label} free`} aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
          <span style={{ width: `${pct}%` }} />
          {p.min !== undefined && p.total ? <i style={{ left: `${Math.round((100 * p.min) / p.total)}%` }} title="low-water mark" /> : null}
        </div>
      )}
    </div>
  );
}

/** DASHBOARD_READS are the documents the dashboard reads, asked for early when a load opens on
 * it (see prefetch). */
export const DASHBOARD_READS = ['/system/info', '/health', '/ota/status'] as const;
const [INFO, HEALTH, OTA] = DASHBOARD_READS;

export function Dashboard() {
  const [info, infoErr] = useRefresh(() => getFirst<Info>(INFO), ['logs', 'config', 'net'], [], prefetched<Info>(INFO));
  const [health] = useRefresh(() => getFirst<HealthDoc>(HEALTH), ['logs'], [], prefetched<HealthDoc>(HEALTH));
  const net = useEvent<NetStatus>('net');
  const wifi = useEvent<{ state: string; ssid?: string; rssi?: number; reason?: { code: number; text: string } }>('wifi');
  const sk = useEvent<{ server?: { host?: string; port?: number; scheme?: string }; token?: { state?: string; reason?: string }; ws?: { connected?: boolean } }>('sk');
  const plugins = useEvent<PluginList>('plugins');
  const otaEv = useEvent<Record<string, unknown>>('ota');
  const [ota, otaErr] = useRefresh(() => getFirst<Record<string, unknown>>(OTA), ['ota'], [], prefetched<Record<string, unknown>>(OTA));
  const uptime = useUptime(info);
  const hw = info?.hardware;
  const t = info?.time;
  const otaDoc = otaEv ?? ota;
  const running = (otaDoc?.running ?? {}) as Record<string, unknown>;

  return (
    <div class="grid" data-testid="dashboard">
      <Card title="Device">
        {infoErr ? <Problem err={infoErr} /> : null}
        <KV
          testid="identity"
          rows={[
            ['Host name', net?.hostname],
            ['Id', net?.id],
            ['Version', info && `${info.app ?? ''} ${info.version ?? ''}`],
            ['Chip', info?.chip && `${info.chip} rev ${info.chip_revision ?? 0}, ${info.cores ?? '?'} cores`],
            ['Board', hw?.board],
            ['Uptime', uptime !== undefined ? <span data-testid="uptime">{duration(uptime)}</span> : undefined],
            ['Last reset', info?.reset_reason],
          ]}
        />
      </Card>
      <Card title="Memory">
        <Mem label="Heap" free={info?.free_heap} min={info?.min_free_heap} total={hw ? (hw.ram_internal_bytes ?? 0) + (hw.ram_psram_bytes ?? 0) : undefined} />
        <Mem label="Internal RAM" free={info?.free_internal} min={info?.min_internal_free} total={hw?.ram_internal_bytes} />
      </Card>
      <Card title="Health" actions={<a href="#/health">Details</a>}>
        {health ? (
          <>
            <p>
              Worst state <Badge state={health.worst} />
            </p>
            <ul class="conds" data-testid="dash-conditions">
              {health.conditions
                .filter((c) => c.state !== 'normal')
                .map((c) => (
                  <li key={c.key}>
                    <Badge state={c.state} /> <code>{c.key}</code> {c.message}
                  </li>
                ))}
            </ul>
            {health.conditions.every((c) => c.state === 'normal') && <p class="muted">All {health.conditions.length} conditions normal.</p>}
          </>
        ) : null}
      </Card>
      <Card title="Time">
        <KV
          rows={[
            ['Now', t?.now ? new Date(t.now).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : 'not set'],
            ['Source', t?.source],
            ['Synced', t ? (t.synced ? 'yes' : 'no') : undefined],
          ]}
        />
      </Card>
      <Card title="Network">
        <KV
          testid="net"
          rows={[
            ['Route', net ? (net.up ? `up via ${net.iface}` : 'down') : undefined],
            ['Address', net?.ip],
            ['Gateway', net?.gateway],
            ['RSSI', net?.rssi != null ? `${net.rssi} dBm` : undefined],
            ['WiFi', wifi ? `${wifi.state}${wifi.ssid ? ` (${wifi.ssid})` : ''}` : undefined],
          ]}
        />
      </Card>
      <Card title="Signal K" actions={<a href="#/signalk">Details</a>}>
        <KV
          rows={[
            ['Server', sk?.server?.host ? `${sk.server.scheme || ''}://${sk.server.host}:${sk.server.port}` : 'none'],
            ['Token', sk?.token?.state ? <Badge state={sk.token.state} /> : undefined],
            ['Stream', sk ? (sk.ws?.connected ? 'connected' : 'not connected') : undefined],
          ]}
        />
      </Card>
      <Card title="Plugins" actions={<a href="#/plugins">Manage</a>}>
        {plugins && plugins.plugins.length === 0 && <p class="muted">No plugins installed.</p>}
        <ul class="conds">
          {plugins?.plugins.map((pl) => (
            <li key={pl.id}>
              <Badge state={pl.state} /> {pl.name} <span class="muted">{pl.version}</span>
            </li>
          ))}
        </ul>
      </Card>
      <Card title="Updates" actions={<a href="#/updates">Details</a>}>
        {otaErr && !otaEv ? (
          <Problem err={otaErr} what="firmware updates" />
        ) : (
          <KV rows={[['State', typeof otaDoc?.state === 'string' ? <Badge state={otaDoc.state} /> : undefined], ['Running', String(running.version ?? info?.version ?? '')], ['Available', typeof otaDoc?.available === 'object' && otaDoc.available ? String((otaDoc.available as Record<string, unknown>).version ?? '') : undefined]]} />
        )}
      </Card>
    </div>
  );
}
