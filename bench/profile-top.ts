/**
 * Summarises a V8 CPU profile (`node --cpu-prof`, or BENCH_CPU_PROF=DIR with the benchmarks):
 * the functions with the most self time, and the source files with the most self and total
 * (inclusive) time. Usage: node bench/profile-top.ts FILE.cpuprofile... [N] (several profiles: summed,
 * e.g. several starts of the same binary).
 *
 * A frame in a bundle with a source map beside it (`dist/wharf.cjs.map`, which the build writes)
 * is named by its source file and line, so a profile of the binary reads like one of the sources.
 */
import fs from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
const args = process.argv.slice(2);
const files = args.filter((a) => !/^\d+$/.test(a));
const n = args.find((a) => /^\d+$/.test(a)) ?? '25';
if (!files.length) {
  process.stderr.write('usage: node bench/profile-top.ts FILE.cpuprofile... [N]\n');
  process.exit(2);
}
const maps = new Map<string, SourceMap | undefined>();
/** The frame's source file and 0-based line: through the bundle's source map when there is one. */
function source(frame: Node['callFrame']): { url: string; line: number } {
  if (!maps.has(frame.url)) {
    const mapFile = frame.url.startsWith('file:') ? `${fileURLToPath(frame.url)}.map` : '';
    maps.set(frame.url, mapFile && fs.existsSync(mapFile) ? new SourceMap(JSON.parse(fs.readFileSync(mapFile, 'utf8'))) : undefined);
  }
  const entry = maps.get(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber);
  return entry && 'originalSource' in entry ? { url: entry.originalSource, line: entry.originalLine } : { url: frame.url, line: frame.lineNumber };
}
const short = (url: string) => url.replace(/^(file:\/\/)?.*?\/(node_modules|core|plugins|bin)\//, '$2/') || '(native)';
const label = (node: Node) => {
  const at = source(node.callFrame);
  return `${node.callFrame.functionName || '(anonymous)'} ${short(at.url)}:${at.line + 1}`;
};
const fileOf = (node: Node) => short(source(node.callFrame).url);

const self = new Map<string, number>();
const fileSelf = new Map<string, number>();
const fileTotal = new Map<string, number>();
const fnTotal = new Map<string, number>();
let total = 0;
for (const file of files) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  for (const [id, us] of selfUs) {
    total += us;
    const node = byId.get(id)!;
    self.set(label(node), (self.get(label(node)) ?? 0) + us);
    fileSelf.set(fileOf(node), (fileSelf.get(fileOf(node)) ?? 0) + us);
    // Inclusive: each file and function on the stack once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur)!;
      for (const [key, m] of [
        [`file ${fileOf(node)}`, fileTotal],
        [label(node), fnTotal],
      ] as const) {
        if (seen.has(key)) continue;
        seen.add(key);
        const k = m === fileTotal ? key.slice(5) : key;
        m.set(k, (m.get(k) ?? 0) + us);
      }
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
  `total ${(total / 1e6).toFixed(2)} s sampled${files.length > 1 ? ` in ${files.length} profiles` : ''}\n\nself time by function:\n${top(self)}\n\nself time by file:\n${top(fileSelf)}\n\ntotal time by file:\n${top(fileTotal)}\n\ntotal time by function:\n${top(fnTotal)}\n`,
);
