import { openRuntime } from "../../src/index.js";
import { fetcherOptions } from "./fetcher.js";

// Submits one fetch and waits; HOLDFAST_CRASH_AT kills it inside the call.
const runtime = await openRuntime(fetcherOptions(process.env.HF_DB ?? ""));
const handle = await runtime.submit({
  chatId: "c",
  inputId: "i",
  agent: "fetcher",
  content: { url: "https://example.org" },
});
await handle.result;
await runtime.close();
