/**
 * Size limits of what users name and set, in one place for the server's schemas and the
 * dashboard's forms (which bundles this file: it imports nothing, so it runs in a browser too).
 */

/** Longest display name (an app, a session, a token, an organization), in characters. */
export const DISPLAY_NAME_MAX = 100;

/** Longest organization slug, in characters (lowercase letters, digits and dashes). */
export const ORG_SLUG_MAX = 48;

/** Largest storage limit of an app, in bytes: 2^53 - 1 (8 PiB), the largest exact integer of JSON numbers. */
export const STORAGE_LIMIT_MAX = Number.MAX_SAFE_INTEGER;
