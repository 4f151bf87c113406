// holdfast under the Vercel AI SDK: compiled and run by test/ai/example.test.ts.
//
// An assistant looks up the weather and texts it to the user: `generateText` with a multi-step tool
// loop, on the AI SDK's offline model. The process is SIGKILLed after the text message went out and
// before its outcome was committed. On restart the run is held (nothing proves whether the message
// was sent, so it is not sent again); a person checks the outbox, confirms it, and the run completes
// without asking the model again for what it already answered.
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { fromAiTool, journaledModel, journaledTools } from "../src/ai.js";
import { defineAgent, defineTool, openRuntime, type RunResult } from "../src/index.js";

const lines = (path: string) =>
  existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];

/** The provider: scripted by how many tool results it has seen; every request is logged. */
const scriptedProvider = (log: string) =>
  new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const seen = prompt.filter((m) => m.role === "tool").length;
      appendFileSync(log, `request ${seen + 1}\n`);
      const call = (toolName: string, input: unknown) => ({
        type: "tool-call" as const,
        toolCallId: `call-${seen + 1}`,
        toolName,
        input: JSON.stringify(input),
      });
      const content =
        seen === 0
          ? [call("get_weather", { city: "Lisbon" })]
          : seen === 1
            ? [call("send_sms", { to: "+351 912 345 678", text: "Lisbon: sunny, 24°C" })]
            : [{ type: "text" as const, text: "I texted you the weather in Lisbon." }];
      return {
        content,
        finishReason:
          seen < 2 ? { unified: "tool-calls", raw: "tool_calls" } : { unified: "stop", raw: "stop" },
        usage: {
          inputTokens: { total: 12, noCache: 12, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 8, text: 8, reasoning: 0 },
        },
        warnings: [],
      };
    },
  });

/** Read-only and on the safe list: replayed after a crash. */
export const getWeather = defineTool({
  name: "get_weather",
  description: "Today's weather in a city",
  args: Schema.Struct({ city: Schema.String }),
  disposition: "replay",
  run: async ({ city }) => ({ city, sky: "sunny", celsius: 24 }),
});

/** A side effect, written as an AI SDK tool: never repeated without proof or a person's decision. */
export const makeSendSms = (outbox: string) =>
  fromAiTool(
    "send_sms",
    tool({
      description: "Send a text message",
      inputSchema: jsonSchema<{ to: string; text: string }>({
        type: "object",
        properties: { to: { type: "string" }, text: { type: "string" } },
        required: ["to", "text"],
      }),
      execute: async ({ to, text }) => {
        appendFileSync(outbox, `${to}: ${text}\n`);
        return { sent: true, to };
      },
    }),
  );

const open = (dir: string) => {
  const sendSms = makeSendSms(join(dir, "outbox.txt"));
  const provider = scriptedProvider(join(dir, "provider.log"));
  const assistant = defineAgent({
    name: "assistant",
    version: "1",
    run: async (turn, input: { request: string }) => {
      const model = journaledModel(turn, provider); // provider: any AI SDK model, e.g. openai("gpt-5")
      const tools = journaledTools(turn, [getWeather, sendSms]);
      const { text } = await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: input.request });
      return text;
    },
  });
  return openRuntime({
    store: join(dir, "journal.db"),
    agents: [assistant],
    tools: [getWeather, sendSms],
    allowlist: { get_weather: getWeather.pin },
    recovery: { onOpen: false },
  });
};

/** The first process: submits the request and dies by SIGKILL inside `send_sms`. */
const runUntilKilled = (dir: string): Promise<NodeJS.Signals | null> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "child", dir], {
      env: {
        ...process.env,
        HOLDFAST_CRASH_AT: "after-effect-before-outcome",
        HOLDFAST_CRASH_CALL: "send_sms",
      },
      stdio: "inherit",
    });
    child.on("error", reject);
    child.on("close", (_code, signal) => resolve(signal));
  });

export interface AiSdkStory {
  readonly killedBy: NodeJS.Signals | null;
  readonly held: ReadonlyArray<{ readonly runId: string; readonly reasons: ReadonlyArray<{ code: string }> }>;
  readonly result: RunResult;
  readonly outbox: ReadonlyArray<string>;
  readonly providerRequests: ReadonlyArray<string>;
}

export const aiSdkExample = async (dir: string): Promise<AiSdkStory> => {
  const killedBy = await runUntilKilled(dir);

  // A new process: recovery finds send_sms in doubt and holds the run.
  const runtime = await open(dir);
  const { held } = await runtime.recover();
  const [run] = held;
  if (!run) throw new Error("recovery held nothing");

  // A person looks at the outbox, sees the message went out, and says so.
  const events = await runtime.events(run.runId);
  const { result } = await runtime.decide(run.runId, {
    basedOnVersion: events.at(-1)?.version ?? 0,
    decidedBy: "ada",
    decision: "confirmed-completed",
    note: "the message is in the outbox",
    result: { sent: true, to: "+351 912 345 678" },
  });
  const story = {
    killedBy,
    held,
    result: await result,
    outbox: lines(join(dir, "outbox.txt")),
    providerRequests: lines(join(dir, "provider.log")),
  };
  await runtime.close();
  return story;
};

if (process.argv[2] === "child" && process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[3] ?? ".";
  const runtime = await open(dir);
  const run = await runtime.submit({
    chatId: "chat-1",
    inputId: "message-1",
    agent: "assistant",
    content: { request: "Text me today's weather in Lisbon" },
  });
  await run.result; // never reached: the process dies inside send_sms
  await runtime.close();
}
