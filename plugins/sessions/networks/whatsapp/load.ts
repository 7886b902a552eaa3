/**
 * Loads the WhatsApp runtime (Baileys, `runtime.ts`) when a whatsapp session first needs it. From
 * source it is a dynamic import; in the single executable the build carries it as the asset
 * {@link WHATSAPP_ASSET}, a CommonJS bundle that needs only Node's built-in modules, evaluated here.
 * The main bundle never contains Baileys (the import's specifier is computed; build/build.ts checks), so start-up
 * time and memory without whatsapp sessions are what they were without the adapter.
 */
import { evaluateBundle, seaModule } from '../../../../core/native.ts';

export type WhatsAppRuntime = typeof import('./runtime.ts');

/** The asset name of the runtime bundle in the single executable (build/build.ts writes it). */
export const WHATSAPP_ASSET = 'whatsapp.cjs';

/** Loads the runtime: the executable's asset, or the module itself when running from source. */
export async function loadRuntime(): Promise<WhatsAppRuntime> {
  const sea = seaModule();
  if (sea) return evaluateBundle(sea.getAsset(WHATSAPP_ASSET, 'utf8') as string, 'wharf-whatsapp.cjs') as WhatsAppRuntime;
  // A computed specifier: esbuild leaves it alone, so the program's bundle never contains Baileys.
  const runtime = new URL('./runtime.ts', import.meta.url).href;
  return (await import(runtime)) as WhatsAppRuntime;
}
