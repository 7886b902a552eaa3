/**
 * The little XML the S3 API needs: writing responses, and reading the two request documents
 * (CompleteMultipartUpload, Delete) into a tree. The reader is strict: unbalanced tags, text
 * outside the root, a DOCTYPE or an unknown entity make it throw, which the endpoint answers with
 * 400 MalformedXML.
 */

export function esc(text: string | number | boolean): string {
  return String(text).replace(/[&<>"']/g, (c) => `&${{ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' }[c]!};`);
}

/** `<name>value</name>` for each defined value. */
export function el(name: string, value: string | number | boolean | undefined): string {
  return value === undefined ? '' : `<${name}>${esc(value)}</${name}>`;
}

export const XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n';
export const S3_NS = 'http://s3.amazonaws.com/doc/2006-03-01/';

export interface XmlNode {
  name: string;
  children: XmlNode[];
  text: string;
}

const ENTITIES: ReadonlyMap<string, string> = new Map([
  ['amp', '&'],
  ['lt', '<'],
  ['gt', '>'],
  ['quot', '"'],
  ['apos', "'"],
]);

function decode(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|\w+);|&/g, (whole, ent: string | undefined) => {
    if (ent === undefined) throw new Error('bare &');
    if (ent.startsWith('#x')) return String.fromCodePoint(parseInt(ent.slice(2), 16));
    if (ent.startsWith('#')) return String.fromCodePoint(parseInt(ent.slice(1), 10));
    const v = ENTITIES.get(ent);
    if (v === undefined) throw new Error(`unknown entity ${whole}`);
    return v;
  });
}

/** Parses a document into its root element; throws on anything malformed. */
export function parseXml(source: string): XmlNode {
  let s = source.replace(/^\uFEFF/, '');
  s = s.replace(/^\s*<\?xml[^?]*\?>/, '');
  if (/<!DOCTYPE|<!ENTITY/i.test(s)) throw new Error('DOCTYPE not allowed');
  const tokens = /<!--[\s\S]*?-->|<!\[CDATA\[([\s\S]*?)\]\]>|<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[\w.:-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)|(<)/g;
  const stack: XmlNode[] = [];
  let root: XmlNode | undefined;
  for (const m of s.matchAll(tokens)) {
    const [whole, cdata, closing, name, , selfClose, text, stray] = m;
    if (stray) throw new Error('stray <');
    if (whole.startsWith('<!--')) continue;
    const top = stack[stack.length - 1];
    if (text !== undefined || cdata !== undefined) {
      const value = cdata ?? decode(text!);
      if (!top) {
        if (value.trim()) throw new Error('text outside the root element');
        continue;
      }
      top.text += value;
      continue;
    }
    const local = name!.includes(':') ? name!.slice(name!.indexOf(':') + 1) : name!;
    if (closing) {
      if (!top || top.name !== local) throw new Error(`unexpected </${name}>`);
      stack.pop();
      continue;
    }
    if (!top && root) throw new Error('more than one root element');
    const node: XmlNode = { name: local, children: [], text: '' };
    if (top) top.children.push(node);
    else root = node;
    if (!selfClose) stack.push(node);
  }
  if (!root || stack.length) throw new Error('unclosed element');
  return root;
}

export function child(node: XmlNode, name: string): XmlNode | undefined {
  return node.children.find((c) => c.name === name);
}

export function childrenNamed(node: XmlNode, name: string): XmlNode[] {
  return node.children.filter((c) => c.name === name);
}
