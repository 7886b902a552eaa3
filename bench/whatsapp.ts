/**
 * What the WhatsApp network costs the single executable: start-up time (spawn to first 200) and
 * idle memory with no whatsapp session, against a binary built without the adapter
 * (`WHARF_BASELINE_BIN`, optional: build one from the commit before the adapter), and with one
 * paired whatsapp session that the server resumes at start (Baileys loads then); and the binary's
 * size. The resumed session connects to a local WebSocket server that accepts and stays silent
 * (the live network cannot be reached from here), so it idles in `connecting` with Baileys loaded.
 *
 *   WHARF_BASELINE_BIN=/tmp/wharf-before node bench/run.ts whatsapp
 */
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { WebSocketServer } from 'ws';
import { fmt, median, root, type ServerSpec, startServer, ensureBinary } from './lib.ts';

const IDLE_WAIT_MS = 6000;

/** A data dir with a user, a whatsapp session and, when `paired`, the stored pairing of an account that resumes at start. */
async function seed(bin: string, dir: string, config: string, paired: boolean): Promise<void> {
  const env = { ...process.env, XDG_CACHE_HOME: path.join(dir, 'cache') };
  execFileSync(
    bin,
    ['admin', 'create-user', '--email', 'bench@example.test', '--password', 'correct horse battery', '--org', 'Bench', '--data-dir', dir, '--config', config],
    { env },
  );
  const server = await startServer({
    name: 'seed',
    argsFor: (port) => [bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dir, '--config', config]],
    env,
  });
  try {
    const headers = { 'content-type': 'application/json', origin: server.url };
    const login = await fetch(`${server.url}/auth/login`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email: 'bench@example.test', password: 'correct horse battery' }),
    });
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const res = await fetch(`${server.url}/api/whatsapp-sessions`, {
      method: 'POST',
      headers: { ...headers, cookie },
      body: JSON.stringify({ name: 'Bench', phone_number: '+14155550123', account_protection: false, log_messages: true }),
    });
    if (res.status !== 201) throw new Error(`creating the session: ${res.status} ${await res.text()}`);
  } finally {
    await server.stop();
  }
  if (!paired) return;
  // The pairing a phone would have left: credentials with the account signed, resumed at start.
  const { initAuthCreds, BufferJSON } = await import('baileys');
  const { loadKeys } = await import('../core/keys.ts');
  const { default: Database } = await import('better-sqlite3');
  const creds = {
    ...initAuthCreds(),
    me: { id: '14155550123:12@s.whatsapp.net', name: 'Bench' },
    account: { details: Buffer.alloc(16), accountSignatureKey: Buffer.alloc(32) },
    registered: true,
  };
  const keys = loadKeys(dir);
  const db = new Database(path.join(dir, 'wharf.db'));
  const id = (db.prepare("SELECT id FROM sessions_sessions WHERE type = 'whatsapp'").get() as { id: number }).id;
  db.prepare('INSERT INTO sessions_whatsapp_accounts (session_id, creds_enc, registered, resume, updated_at) VALUES (?, ?, 1, 1, ?)').run(
    id,
    keys.encrypt(JSON.stringify(creds, BufferJSON.replacer), `sessions:whatsapp:${id}:creds`),
    new Date().toISOString(),
  );
  db.close();
}

export async function run(options: { starts?: number } = {}): Promise<string> {
  const starts = options.starts ?? 6;
  const bin = ensureBinary();
  const baseline = process.env.WHARF_BASELINE_BIN;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-bench-wa-'));
  // WhatsApp's stand-in: accepts, records when, stays silent.
  const ws = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  const connections: number[] = [];
  ws.on('connection', () => connections.push(performance.now()));
  await new Promise((resolve) => ws.once('listening', resolve));
  const config = path.join(work, 'w.toml');
  fs.writeFileSync(
    config,
    `[plugins.sessions.whatsapp]\nwebsocket_url = "ws://127.0.0.1:${(ws.address() as AddressInfo).port}/ws/chat"\nlog_level = "silent"\n`,
  );
  // Both executables copied the same way: a file's resident pages depend on how it entered the
  // page cache (a freshly written file maps in larger folios), which would otherwise differ.
  const copy = (from: string, name: string) => {
    const to = path.join(work, name);
    fs.copyFileSync(from, to);
    fs.chmodSync(to, 0o755);
    return to;
  };
  const current = copy(bin, 'wharf');
  const before = baseline ? copy(baseline, 'wharf-baseline') : undefined;
  const without = path.join(work, 'without');
  const resuming = path.join(work, 'resuming');
  await seed(current, without, config, false);
  await seed(current, resuming, config, true);

  const spec = (name: string, binary: string, dir: string): ServerSpec => ({
    name,
    argsFor: (port) => [binary, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dir, ...(binary === current ? ['--config', config] : [])]],
    env: { WHARF_PLUGINS__STORAGE__FS__LISTEN: '127.0.0.1:0', XDG_CACHE_HOME: path.join(work, 'cache') },
  });
  const specs: ServerSpec[] = [
    ...(before ? [spec('binary without the adapter (baseline), no whatsapp session', before, without)] : []),
    spec('binary with the adapter, no whatsapp session running', current, without),
    spec('binary with the adapter, one whatsapp session resumed at start', current, resuming),
  ];
  const startMs = new Map<string, number[]>(specs.map((s) => [s.name, []]));
  const rss = new Map<string, { total: number; anon: number }[]>(specs.map((s) => [s.name, []]));
  const firstConnect: number[] = [];
  for (let i = 0; i < starts; i++) {
    for (const s of specs) {
      const before = connections.length;
      const t0 = performance.now();
      const server = await startServer(s);
      startMs.get(s.name)!.push(server.startMs);
      await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
      rss.get(s.name)!.push(server.rssMiB());
      if (connections.length > before) firstConnect.push(connections[before]! - t0);
      await server.stop();
    }
  }
  ws.close();
  fs.rmSync(work, { recursive: true, force: true });

  const mib = (file: string) => fs.statSync(file).size / 2 ** 20;
  const first = specs[0]!.name;
  const lines = [
    `binary size: ${fmt(mib(bin), 1)} MiB (dist/wharf)${baseline ? `; without the adapter ${fmt(mib(baseline), 1)} MiB: growth ${fmt(mib(bin) - mib(baseline), 1)} MiB` : ''}; of which the WhatsApp runtime asset ${fmt(mib(path.join(root, 'dist/whatsapp.cjs')), 1)} MiB and the notices ${fmt(mib(path.join(root, 'dist/THIRD-PARTY-NOTICES.txt')), 1)} MiB`,
    '',
    '| server | start to first 200 (ms, median) | ratio to the first row | idle RSS after 6 s, MiB (private part), median |',
    '|---|---|---|---|',
  ];
  for (const s of specs) {
    const start = median(startMs.get(s.name)!);
    const mem = rss.get(s.name)!;
    lines.push(
      `| ${s.name} | ${fmt(start, 0)} | ${fmt(start / median(startMs.get(first)!))} | ${fmt(median(mem.map((m) => m.total)), 1)} (${fmt(median(mem.map((m) => m.anon)), 1)}) |`,
    );
  }
  lines.push(
    '',
    `The resumed session's first connection reached the WebSocket server ${fmt(median(firstConnect), 0)} ms (median) after the spawn: the supervisor's first run (2 s after start) plus loading Baileys from the asset.`,
    '',
    `(${starts} starts per server, interleaved; both executables copied alike into a temporary directory; RSS read from /proc after ${IDLE_WAIT_MS / 1000} s idle)`,
  );
  return lines.join('\n');
}
