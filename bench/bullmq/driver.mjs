// driver.mjs runs one case of the RMQ for Go benchmark with BullMQ. The Go
// bench (bench/sys_bullmq.go) starts it as a child process per case:
//
//   node driver.mjs '{"case":"produce","host":"127.0.0.1","port":6379,...}'
//
// Protocol, one JSON object a line on stdout:
//   1. the driver warms BullMQ up on a queue of its own (removed after),
//      sets the case up (connections, a consume backlog) and prints
//      {"ready":true};
//   2. it waits for a line on stdin ("go"): the bench reads this process's
//      CPU from /proc and Redis's INFO between the two, so the timed section
//      is exactly what follows;
//   3. it runs the timed section and prints {"done":true,...} with what it
//      counted;
//   4. it waits for stdin to close (the bench reads CPU and INFO again
//      first), closes its connections and exits 0.
// A failure prints {"error":"..."} and exits 1.
//
// Job bodies are the bench's: "tag-i-dueMs-xxx…", body bytes long.

import { Queue, Worker } from 'bullmq';
import { createInterface } from 'node:readline';

const cfg = JSON.parse(process.argv[2] ?? '{}');
// maxRetriesPerRequest null: BullMQ requires it of a Worker's connection.
const connection = { host: cfg.host, port: cfg.port, maxRetriesPerRequest: null };
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const opened = []; // queues and workers to close at the end

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// nextLine resolves with the next line of stdin, or null at its end.
async function nextLine() {
  const r = await lines.next();
  return r.done ? null : r.value;
}

// nowMs is the wall clock in ms with sub-ms precision (Date.now() has whole ms).
function nowMs() {
  return performance.timeOrigin + performance.now();
}

function makeBody(tag, i, dueMs) {
  const head = `${tag}-${i}-${dueMs}-`;
  return head.length >= cfg.body ? head : head + 'x'.repeat(cfg.body - head.length);
}

function dueOf(body) {
  return Number(body.split('-', 3)[2]);
}

function queue() {
  const q = new Queue(cfg.queue, { connection });
  opened.push(q);
  return q;
}

// parallel runs f(i) for i in [0, n) from g async loops taking the next i in turn.
async function parallel(n, g, f) {
  let next = 0;
  const loop = async () => {
    for (let i = next++; i < n; i = next++) {
      await f(i);
    }
  };
  await Promise.all(Array.from({ length: g }, loop));
}

// chunks runs f(from, to) over [0, n) in chunks of size from g async loops.
async function chunks(n, size, g, f) {
  await parallel(Math.ceil(n / size), g, (c) => f(c * size, Math.min(n, (c + 1) * size)));
}

async function addBulk(q, tag, from, to, delay) {
  const jobs = [];
  for (let i = from; i < to; i++) {
    jobs.push({ name: 'bench', data: makeBody(tag, i, 0), opts: delay ? { delay: delay(i) } : undefined });
  }
  await q.addBulk(jobs);
}

// timed runs setup, says ready, waits for "go", and times body.
async function timed(body) {
  say({ ready: true });
  if ((await nextLine()) === null) {
    throw new Error('stdin closed before go');
  }
  const t0 = nowMs();
  const out = await body();
  say({ done: true, ms: nowMs() - t0, ...out });
}

// warm runs BullMQ's paths once before a timed case, as the Go bench's
// warm-up does for asynq and RMQ (a node process starts with cold JIT and no
// loaded code): 500 adds from 32 loops, 500 added in bulk, 200 delayed by
// 1–50 ms, all consumed by a Worker; then the warm-up queue is removed.
async function warm() {
  const name = `${cfg.queue}-warm`;
  const q = new Queue(name, { connection });
  const total = 1200;
  let done = 0;
  let all;
  const finished = new Promise((resolve) => (all = resolve));
  const w = new Worker(name, async () => {}, { connection, concurrency: cfg.workers || 32 });
  w.on('completed', () => {
    if (++done === total) all();
  });
  await parallel(500, 32, (i) => q.add('bench', makeBody('w', i, 0)));
  await addBulk(q, 'w', 500, 1000);
  await parallel(200, 32, (i) => q.add('bench', makeBody('w', 1000 + i, 0), { delay: 1 + (i % 50) }));
  await finished;
  await w.close();
  await q.obliterate({ force: true });
  await q.close();
}

const cases = {
  // n single adds from g concurrent loops, due at once.
  async produce() {
    const q = queue();
    await q.waitUntilReady();
    await timed(async () => {
      await parallel(cfg.n, cfg.g, (i) => q.add('bench', makeBody('p', i, 0)));
      return { count: cfg.n };
    });
  },

  // n jobs with addBulk of batch jobs from g concurrent loops.
  async batch() {
    const q = queue();
    await q.waitUntilReady();
    await timed(async () => {
      await chunks(cfg.n, cfg.batch, cfg.g, (from, to) => addBulk(q, 'b', from, to));
      return { count: cfg.n };
    });
  },

  // A backlog of n jobs (untimed), drained by a Worker of concurrency
  // workers with a no-op processor: timed until n jobs have completed (each
  // moved out of the active list).
  async consume() {
    const q = queue();
    await chunks(cfg.n, 1000, 4, (from, to) => addBulk(q, 'c', from, to));
    let done = 0;
    let all;
    const finished = new Promise((resolve) => (all = resolve));
    const w = new Worker(cfg.queue, async () => {}, { connection, concurrency: cfg.workers, autorun: false });
    opened.push(w);
    w.on('completed', () => {
      if (++done === cfg.n) all();
    });
    w.on('error', (err) => say({ warning: String(err) }));
    await w.waitUntilReady();
    await timed(async () => {
      w.run();
      await finished;
      return { count: done };
    });
  },

  // n jobs due in a year (the memory case's waiting jobs), with addBulk of
  // 1,000 from 4 loops.
  async far() {
    const q = queue();
    await q.waitUntilReady();
    const year = 365 * 24 * 3600 * 1000;
    await timed(async () => {
      await chunks(cfg.n, 1000, 4, (from, to) => addBulk(q, cfg.tag, from, to, (i) => year + i));
      return { count: cfg.n };
    });
  },

  // Lateness as the Go bench's runLateness measures it: job i is due at
  // t0 + i/rate (whole ms) and added lead before with a delay to that
  // instant, from producers loops (loop w adds w, w+g, …, in due order); a
  // Worker of concurrency workers records processor call − due time.
  async lateness() {
    const q = queue();
    const total = Math.floor((cfg.durationMs / 1000) * cfg.rate);
    const lat = [];
    let extra = 0;
    let all;
    const finished = new Promise((resolve) => (all = resolve));
    const w = new Worker(
      cfg.queue,
      async (job) => {
        const d = nowMs() - dueOf(job.data);
        if (lat.length < total) {
          lat.push(d);
          if (lat.length === total) all();
        } else {
          extra++;
        }
      },
      { connection, concurrency: cfg.workers },
    );
    opened.push(w);
    w.on('error', (err) => say({ warning: String(err) }));
    await Promise.all([q.waitUntilReady(), w.waitUntilReady()]);
    await timed(async () => {
      const interval = 1000 / cfg.rate;
      const t0 = nowMs() + cfg.leadMs + 200;
      let sendLag = 0;
      const loop = async (first) => {
        for (let i = first; i < total; i += cfg.producers) {
          const due = t0 + i * interval;
          const dueMs = Math.floor(due);
          const sendAt = due - cfg.leadMs;
          const wait = sendAt - nowMs();
          if (wait > 0) {
            await new Promise((r) => setTimeout(r, wait));
          }
          sendLag = Math.max(sendLag, nowMs() - sendAt);
          // BullMQ's due time is its own Date.now() at the add plus the
          // delay: never before dueMs, since that clock only moves on.
          const delay = Math.max(0, Math.ceil(dueMs - Date.now()));
          await q.add('bench', makeBody(cfg.tag, i, dueMs), { delay });
        }
      };
      await Promise.all(Array.from({ length: Math.min(cfg.producers, total) }, (_, w) => loop(w)));
      const limit = setTimeout(all, cfg.leadMs + 60000);
      await finished;
      clearTimeout(limit);
      await new Promise((r) => setTimeout(r, 50)); // catch duplicate deliveries
      return { sent: total, lat: lat.slice(), extra, sendLagMs: sendLag };
    });
  },
};

async function main() {
  const run = cases[cfg.case];
  if (!run) {
    throw new Error(`unknown case ${JSON.stringify(cfg.case)}`);
  }
  if (cfg.case !== 'far') {
    await warm(); // far only loads the memory case's jobs: untimed
  }
  await run();
  await nextLine(); // the bench has read its figures: stdin closes
  await Promise.all(opened.map((c) => c.close()));
}

main().then(
  () => process.exit(0),
  (err) => {
    say({ error: String(err?.stack ?? err) });
    process.exit(1);
  },
);
