/** Stylesheets imported for esbuild to bundle. */
declare module '*.css';
