/**
 * A real process running the LangGraph graph of test/support/langgraph-graph.ts on a holdfast
 * journal, for the crashed-graph test. Configured by environment: HF_DB, HF_WITNESS, HF_THREAD,
 * and HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL. Prints one JSON object per line on stdout.
 */
import { HumanMessage } from "@langchain/core/messages";
import { openRuntime } from "../../src/index.js";
import { HoldfastSaver } from "../../src/langgraph.js";
import { buildGraph, recordCallAgent } from "./langgraph-graph.js";
import { makeRecordTool } from "./witness.js";

const env = process.env;
const runtime = await openRuntime({
  store: env.HF_DB!,
  agents: [recordCallAgent],
  tools: [makeRecordTool(env.HF_WITNESS!)],
});
const checkpointer = await HoldfastSaver.open({ store: env.HF_DB! });
const graph = buildGraph(runtime, checkpointer);
const state = await graph.invoke(
  { messages: [new HumanMessage("record graph-a")] },
  { configurable: { thread_id: env.HF_THREAD! } },
);
process.stdout.write(`${JSON.stringify({ kind: "finished", messages: state.messages.length })}\n`);
await checkpointer.close();
await runtime.close();
