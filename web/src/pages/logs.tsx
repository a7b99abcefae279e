// Logs: a live tail. The `logs` event only says that lines arrived ({next}); the page then
// reads GET /logs?after=<last sequence seen>. Pause stops following, copy takes the shown lines.

import { useEffect, useRef, useState } from 'preact/hooks';
import { get, put } from '../api';
import { onEvent } from '../live';
import { Card, useAction } from '../ui';

interface Page {
  first: number;
  next: number;
  dropped: number;
  gap: boolean;
  from: number;
  lines: string[];
}

const KEEP = 1000;
const LEVELS = ['none', 'error', 'warn', 'info', 'debug', 'verbose'];

export function LogsPage() {
  const [lines, setLines] = useState<{ seq: number; text: string }[]>([]);
  const [paused, setPaused] = useState(false);
  const [gap, setGap] = useState(false);
  const [tag, setTag] = useState('*');
  const [level, setLevel] = useState('info');
  const [filter, setFilter] = useState('');
  const [run, busy, note] = useAction();
  const after = useRef(0);
  const box = useRef<HTMLPreElement>(null);

  useEffect(() => {
    if (paused) return;
    let alive = true;
    let busy = false;
    let again = false;
    const fetchNew = async () => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        const q = after.current > 0 ? `?after=${after.current}&limit=1000` : '?limit=1000';
        const p = await get<Page>('/logs' + q);
        if (alive && p.lines.length) {
          after.current = p.next - 1;
          if (p.gap) setGap(true);
          setLines((old) => [...old, ...p.lines.map((text, i) => ({ seq: p.from + i, text }))].slice(-KEEP));
        }
      } catch {
        // the next event asks again
      }
      busy = false;
      if (again && alive) {
        again = false;
        void fetchNew();
      }
    };
    void fetchNew();
    const offs = ['logs', '_open'].map((n) => onEvent(n, () => void fetchNew()));
    return () => {
      alive = false;
      offs.forEach((f) => f());
    };
  }, [paused]);

  useEffect(() => {
    const el = box.current;
    if (el && !paused) el.scrollTop = el.scrollHeight;
  }, [lines]);

  const shown = filter ? lines.filter((l) => l.text.toLowerCase().includes(filter.toLowerCase())) : lines;
  const copy = () =>
    run(async () => {
      const text = shown.map((l) => l.text).join('\n') + '\n';
      try {
        await navigator.clipboard.writeText(text);
      } catch {
        const ta = document.createElement('textarea');
        ta.value = text;
        document.body.appendChild(ta);
        ta.select();
        document.execCommand('copy');
        ta.remove();
      }
      return `Copied ${shown.length} lines.`;
    });

  return (
    <div>
      <Card
        title="Live log"
        actions={
          <>
            <button aria-pressed={paused} onClick={() => setPaused(!paused)}>
              {paused ? 'Resume' : 'Pause'}
            </button>
            <button onClick={copy}>Copy</button>
            <button onClick={() => setLines([])}>Clear view</button>
          </>
        }
      >
        <label class="inline">
          Filter <input value={filter} onInput={(e) => setFilter(e.currentTarget.value)} placeholder="text" />
        </label>
        {gap && <p class="muted">Some lines were overwritten in the device's ring before they were read.</p>}
        {paused && <p class="muted" role="status">Paused: new lines are not shown.</p>}
        <pre class="log" ref={box} data-testid="log" tabIndex={0} aria-live="off">
          {shown.map((l) => (
            <div key={l.seq} class={`ll ll-${l.text[0]}`}>
              {l.text}
            </div>
          ))}
        </pre>
        {note}
      </Card>
      <Card title="Level per tag">
        <form
          class="row wrap"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const r = await put<{ tag: string; level: string }>('/logs/level', { tag: tag || '*', level });
              return `Level of ${r.tag} is ${r.level}.`;
            });
          }}
        >
          <label>
            Tag (* for all)
            <input value={tag} onInput={(e) => setTag(e.currentTarget.value)} />
          </label>
          <label>
            Level
            <select aria-label="Level" value={level} onChange={(e) => setLevel(e.currentTarget.value)}>
              {LEVELS.map((l) => (
                <option key={l}>{l}</option>
              ))}
            </select>
          </label>
          <button type="submit" disabled={busy}>
            Set level
          </button>
        </form>
        <p class="muted">Levels last until the next reboot.</p>
      </Card>
    </div>
  );
}
