/**
 * holdfast/langgraph — a LangGraph.js checkpointer on the holdfast journal: checkpoints and pending
 * writes are events in per-thread streams, hash-chained, masked, sealed when encryption is on and
 * verified by `holdfast audit`. Needs `@langchain/langgraph-checkpoint` and `@langchain/core`
 * (optional peer dependencies).
 *
 * @example
 * import { HoldfastSaver } from "holdfast/langgraph";
 *
 * const checkpointer = await HoldfastSaver.open({ store: ".holdfast/journal.db" });
 * const app = graph.compile({ checkpointer });
 * await app.invoke({ messages: [] }, { configurable: { thread_id: "chat-42" } });
 */
export { HoldfastSaver, type HoldfastSaverOptions } from "./adapters/integrations/langgraph/index.js";
