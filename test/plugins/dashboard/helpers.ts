/** Dashboard browser tests: screenshots under test-output/, and the browser's own cookie for API checks. */
import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { root } from '../../helpers/cli.ts';
import type { TestApp } from '../../helpers/app.ts';

export const SCREENSHOTS = path.join(root, 'test-output/screenshots');

/** Saves the whole page as test-output/screenshots/<name>.png. */
export async function shot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true, animations: 'disabled' });
  return file;
}

/** Headers that make an API call as the browser's signed-in user (its `__session` cookie, same origin). */
export async function asBrowser(context: BrowserContext, app: TestApp): Promise<Record<string, string>> {
  const cookie = (await context.cookies(app.url)).find((c) => c.name === '__session');
  if (!cookie) throw new Error('the browser has no __session cookie');
  return { cookie: `__session=${cookie.value}`, origin: app.url };
}

/** An element's text as a reader sees it (Playwright's innerText: laid out, hidden text left out). */
export function inner(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator method, not the DOM property.
  return locator.innerText();
}

/** The text of the first element `selector` matches (default: the main region). */
export function text(page: Page, selector = 'main'): Promise<string> {
  return inner(page.locator(selector).first());
}

/** The page's heading. */
export function heading(page: Page): Promise<string> {
  return inner(page.getByRole('heading', { level: 1 }));
}

/** Polls `probe` until it returns a truthy value. */
export async function eventually<T>(probe: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`${what} not met in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
