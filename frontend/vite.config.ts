import { defineConfig } from "vite";

// The control plane serves the built files from its package, at / (index.html for any unknown
// path, so client-side routes deep-link). `npm run dev` proxies the API to a running `make run`.
export default defineConfig({
  build: {
    outDir: "../backend/firstlume/static", // relative to this directory
    emptyOutDir: true,
    sourcemap: true,
    rollupOptions: {
      onwarn(warning, warn) {
        // react-router marks its modules "use client" for server components; meaningless here.
        if (warning.code === "MODULE_LEVEL_DIRECTIVE") return;
        warn(warning);
      },
    },
  },
  server: {
    proxy: {
      "/graphql": { target: "http://127.0.0.1:8000", ws: true },
      "/api": "http://127.0.0.1:8000",
    },
  },
});
