/** config.example.toml and the README's configuration reference stay in step with the schemas. */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_FILE, README_FILE, exampleToml, readmeWithReference } from '../build/docs.ts';
import { documentKeys, keyLines, resolveConfig } from '../core/config.ts';
import { builtinPlugins } from '../plugins/index.ts';

describe('configuration documents', () => {
  const example = fs.readFileSync(EXAMPLE_FILE, 'utf8');

  it('documents every key of every schema with a description', () => {
    const undocumented = documentKeys(builtinPlugins).filter((d) => d.description.trim().length < 10);
    expect(undocumented.map((d) => d.key)).toEqual([]);
  });

  it('has every key in config.example.toml, set or commented out', () => {
    const set = new Set(keyLines(example).keys());
    const commented = new Set([...example.matchAll(/^# ([a-z0-9_]+) = \(/gm)].map((m) => m[1]));
    const missing = documentKeys(builtinPlugins).filter((d) => !set.has(d.key) && !commented.has(d.key.split('.').at(-1)));
    expect(missing.map((d) => d.key)).toEqual([]);
  });

  it('config.example.toml is what the schemas generate (run npm run docs)', () => {
    expect(example).toBe(exampleToml());
  });

  it('config.example.toml validates, and every value in it is the default', () => {
    const fromExample = resolveConfig(builtinPlugins, { toml: { text: example, file: 'config.example.toml' }, cwd: '/x' });
    const fromNothing = resolveConfig(builtinPlugins, { cwd: '/x' });
    expect(fromExample.core).toEqual(fromNothing.core);
    expect(fromExample.plugins).toEqual(fromNothing.plugins);
  });

  it("the README's configuration reference is what the schemas generate (run npm run docs)", () => {
    const readme = fs.readFileSync(README_FILE, 'utf8');
    expect(readme).toBe(readmeWithReference(readme));
  });
});
