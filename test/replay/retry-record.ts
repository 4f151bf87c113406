// Records one run of retry-agents.ts in the journal at argv[2], left waiting for its scheduled
// retry: the process exits once the first attempt failed and the retry is recorded.
import { openRuntime } from "../../src/index.js";
import { agents, tools } from "./retry-agents.js";

const store = process.argv[2];
if (!store) throw new Error("usage: retry-record.ts <journal>");
const runtime = await openRuntime({ store, agents, tools });
await runtime.submit({ chatId: "c1", inputId: "m1", agent: "retrier", content: {} });
while (!(globalThis as { tries?: number }).tries) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 500));
process.exit(0);
