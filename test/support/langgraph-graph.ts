import { AIMessage, type BaseMessage, ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { tool } from "@langchain/core/tools";
import { END, interrupt, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { defineAgent, type Runtime } from "../../src/index.js";
import type { HoldfastSaver } from "../../src/langgraph.js";

/** The holdfast agent behind the graph's tool: one journaled call of the witnessed `record` tool. */
export const recordCallAgent = defineAgent({
  name: "graph-record",
  version: "1",
  run: async (turn, input: { label: string }) => turn.tool("record", { label: input.label }),
});

/**
 * A LangGraph graph whose tool node runs a holdfast-journaled tool: each tool call is a holdfast
 * run admitted with the tool call's id as its input, so a re-run tool node finds the same run. A
 * run that is not completed (held for a person) interrupts the graph; resumed after the decision,
 * the tool node reads the run's outcome.
 */
export const buildGraph = (runtime: Runtime, checkpointer: HoldfastSaver) => {
  const record = tool(
    async (args: { label: string }, config: RunnableConfig & { toolCall?: { id?: string } }) => {
      const threadId = String(config.configurable?.thread_id);
      const handle = await runtime.submit({
        chatId: `graph-${threadId}`,
        inputId: config.toolCall?.id ?? "no-tool-call-id",
        agent: "graph-record",
        content: { label: args.label },
      });
      const result = await handle.result;
      if (result.status === "completed") return JSON.stringify(result.output);
      interrupt({ runId: handle.runId, status: result.status });
      return JSON.stringify(await runtime.wait(handle.runId));
    },
    {
      name: "record",
      description: "Record a label in the witness file (a real side effect).",
      schema: {
        type: "object",
        properties: { label: { type: "string" } },
        required: ["label"],
      },
    },
  );
  const agent = (state: { messages: BaseMessage[] }) => {
    const last = state.messages.at(-1);
    if (last instanceof ToolMessage) return { messages: [new AIMessage(`done: ${String(last.content)}`)] };
    return {
      messages: [
        new AIMessage({
          content: "",
          tool_calls: [{ id: "call-1", name: "record", args: { label: "graph-a" }, type: "tool_call" }],
        }),
      ],
    };
  };
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode([record]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer });
};
