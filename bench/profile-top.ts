/**
 * Summarises a V8 CPU profile (`node --cpu-prof`, or BENCH_CPU_PROF=DIR with the benchmarks):
 * the functions with the most self time, and the source files with the most self and total
 * (inclusive) time. Usage: node bench/profile-top.ts FILE.cpuprofile [N]
 */
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const [file, n = '25'] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node bench/profile-top.ts FILE.cpuprofile [N]\n');
  process.exit(2);
}
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
const short = (url: string) => url.replace(/^file:\/\/.*?\/(node_modules|core|plugins|bin)\//, '$1/').replace(/^node:/, 'node:') || '(native)';
const label = (node: Node) => `${node.callFrame.functionName || '(anonymous)'} ${short(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;

const self = new Map<string, number>();
const fileSelf = new Map<string, number>();
const fileTotal = new Map<string, number>();
const fnTotal = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + us);
  fileSelf.set(short(node.callFrame.url), (fileSelf.get(short(node.callFrame.url)) ?? 0) + us);
  // Inclusive: each file and function on the stack once.
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const node = byId.get(cur)!;
    for (const [key, m] of [
      [`file ${short(node.callFrame.url)}`, fileTotal],
      [label(node), fnTotal],
    ] as const) {
      if (seen.has(key)) continue;
      seen.add(key);
      const k = m === fileTotal ? key.slice(5) : key;
      m.set(k, (m.get(k) ?? 0) + us);
    }
  }
}
const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
const top = (m: Map<string, number>) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(n))
    .map(([k, v]) => `${pct(v)}  ${k}`)
    .join('\n');
process.stdout.write(
  `total ${(total / 1e6).toFixed(2)} s sampled\n\nself time by function:\n${top(self)}\n\nself time by file:\n${top(fileSelf)}\n\ntotal time by file:\n${top(fileTotal)}\n\ntotal time by function:\n${top(fnTotal)}\n`,
);
