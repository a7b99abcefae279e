import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { dropPrefetched, getFirst, onUnauthorized, prefetch, prefetched } from '../../src/api';

// The device's answers, one list per path, taken in order; every request is recorded.
let answers: Record<string, [number, unknown][]>;
let asked: string[];
globalThis.fetch = (async (url: string) => {
  asked.push(url);
  const [status, body] = answers[url]?.shift() ?? [404, { error: 'not_found' }];
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}) as typeof fetch;

describe('early reads', () => {
  beforeEach(() => {
    answers = {};
    asked = [];
    dropPrefetched();
  });

  it('answers the first getFirst from the early read and the next from the device', async () => {
    answers['/api/v1/system/info'] = [
      [200, { uptime_s: 1 }],
      [200, { uptime_s: 2 }],
    ];
    await prefetch('/system/info');
    assert.deepEqual(prefetched('/system/info'), { uptime_s: 1 });
    assert.deepEqual(await getFirst('/system/info'), { uptime_s: 1 });
    assert.equal(prefetched('/system/info'), undefined, 'an early read is taken once');
    assert.deepEqual(await getFirst('/system/info'), { uptime_s: 2 });
    assert.equal(asked.length, 2);
  });

  it('asks again after an early read that failed, and keeps its 401 from the sign-in check', async () => {
    answers['/api/v1/health'] = [
      [401, { error: 'unauthorized' }],
      [200, { worst: 'normal', conditions: [] }],
    ];
    let told = 0;
    const off = onUnauthorized(() => told++);
    try {
      await prefetch('/health');
      assert.equal(prefetched('/health'), undefined);
      assert.deepEqual(await getFirst('/health'), { worst: 'normal', conditions: [] });
      assert.equal(told, 0);
    } finally {
      off();
    }
  });

  it('forgets dropped early reads: the page reads afresh', async () => {
    answers['/api/v1/ota/status'] = [
      [200, { state: 'idle' }],
      [200, { state: 'downloading' }],
    ];
    await prefetch('/ota/status');
    dropPrefetched();
    assert.equal(prefetched('/ota/status'), undefined);
    assert.deepEqual(await getFirst('/ota/status'), { state: 'downloading' });
  });
});
