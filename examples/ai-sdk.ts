// holdfast under the Vercel AI SDK: compiled and run by test/ai/example.test.ts.
//
// An assistant looks up the weather and texts it to the user: `generateText` with a multi-step tool
// loop, on the AI SDK's offline model. The provider is busy at first (a 429 with `retry-after: 1`):
// the model's retry policy asks again a second later, both attempts journaled. The process is then
// SIGKILLed after the text message went out and before its outcome was committed. On restart the run
// is held (nothing proves whether the message was sent, so it is not sent again); meanwhile the user
// writes twice more, and both messages wait in the chat's queue. A person checks the outbox,
// confirms it, and the run completes without asking the model again for what it already answered.
// The next message is admitted; its answer is slow and the user presses Stop (`runtime.cancel`);
// the last message is admitted and answered.
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { APICallError, generateText, jsonSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { fromAiTool, journaledModel, journaledTools } from "../src/ai.js";
import {
  type ControlOutcome,
  defineAgent,
  defineTool,
  openRuntime,
  type RunResult,
  type Runtime,
  type WithdrawnResult,
} from "../src/index.js";
import { moduleSource } from "../src/tools.js";

const lines = (path: string) =>
  existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];

/**
 * The provider, offline: scripted by the question and by how many tool results it has seen; every
 * request is logged. Busy the very first time it is asked, as a real provider sometimes is: an
 * `APICallError` with status 429 and a `retry-after` header, what the AI SDK's providers throw.
 */
const scriptedProvider = (log: string, slowAnswerStarted: () => void) =>
  new MockLanguageModelV3({
    doGenerate: async ({ prompt, abortSignal }) => {
      const question = prompt
        .flatMap((m) => (m.role === "user" ? m.content : []))
        .map((part) => (part.type === "text" ? part.text : ""))
        .join(" ");
      if (lines(log).length === 0) {
        appendFileSync(log, "request 1: 429, retry after 1 s\n");
        throw new APICallError({
          message: "Rate limit reached; try again in 1s",
          url: "https://api.provider.example/v1/chat/completions",
          requestBodyValues: {},
          statusCode: 429,
          responseHeaders: { "retry-after": "1" },
        });
      }
      if (question.includes("Porto")) {
        // A long answer: it is still being written when the user presses Stop, which aborts it.
        appendFileSync(log, "Porto: writing a long answer\n");
        slowAnswerStarted();
        return new Promise((_resolve, reject) =>
          abortSignal?.addEventListener("abort", () => {
            appendFileSync(log, "Porto: aborted\n");
            reject(abortSignal.reason);
          }),
        );
      }
      const seen = prompt.filter((m) => m.role === "tool").length;
      appendFileSync(log, question.includes("Thanks") ? "Thanks: answered\n" : `request ${seen + 1}\n`);
      const call = (toolName: string, input: unknown) => ({
        type: "tool-call" as const,
        toolCallId: `call-${seen + 1}`,
        toolName,
        input: JSON.stringify(input),
      });
      const content = question.includes("Thanks")
        ? [{ type: "text" as const, text: "You're welcome!" }]
        : seen === 0
          ? [call("get_weather", { city: "Lisbon" })]
          : seen === 1
            ? [call("send_sms", { to: "+351 912 345 678", text: "Lisbon: sunny, 24°C" })]
            : [{ type: "text" as const, text: "I texted you the weather in Lisbon." }];
      return {
        content,
        finishReason:
          content[0]?.type === "tool-call"
            ? { unified: "tool-calls", raw: "tool_calls" }
            : { unified: "stop", raw: "stop" },
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
  // The pin covers this file and the helpers it imports, not only the text of `run`.
  ...moduleSource(import.meta.url),
  retry: { attempts: 3 }, // a DefiniteFailure (the service said no) is tried again after a durable backoff
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

/** The assistant: the AI SDK's tool loop, every model and tool call journaled. */
export const makeAssistant = (provider: MockLanguageModelV3, sendSms: ReturnType<typeof makeSendSms>) => {
  const assistant = defineAgent({
    name: "assistant",
    version: "1",
    run: async (turn, input: { request: string }) => {
      // provider: any AI SDK model, e.g. openai("gpt-5"); a 429 or a 529 is retried, each attempt journaled
      const model = journaledModel(turn, provider, { retry: { attempts: 3 }, inDoubt: "replay" });
      const tools = journaledTools(turn, [getWeather, sendSms]);
      const { text } = await generateText({
        model,
        tools,
        stopWhen: stepCountIs(5),
        prompt: input.request,
        maxRetries: 0,
      });
      return text;
    },
  });
  return assistant;
};

const open = async (dir: string) => {
  let slowAnswerStarted = () => {};
  const slowAnswer = new Promise<void>((resolve) => {
    slowAnswerStarted = resolve;
  });
  const sendSms = makeSendSms(join(dir, "outbox.txt"));
  const provider = scriptedProvider(join(dir, "provider.log"), () => slowAnswerStarted());
  const assistant = makeAssistant(provider, sendSms);
  const runtime = await openRuntime({
    store: join(dir, "journal.db"),
    agents: [assistant],
    tools: [getWeather, sendSms],
    allowlist: { get_weather: getWeather.pin },
    recovery: { onOpen: false },
  });
  return { runtime, slowAnswer };
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
  /** The first run's calls: `name #attempt status`. */
  readonly calls: ReadonlyArray<string>;
  /** The queued messages' places in the queue while the first run was held. */
  readonly positions: ReadonlyArray<number | null>;
  readonly result: RunResult;
  readonly cancel: ControlOutcome;
  readonly stopped: RunResult | WithdrawnResult;
  readonly thanked: RunResult | WithdrawnResult;
  /** The chat's runs starting and ending, in the journal's order: `inputId event`. */
  readonly timeline: ReadonlyArray<string>;
  readonly outbox: ReadonlyArray<string>;
  readonly providerRequests: ReadonlyArray<string>;
  readonly auditFindings: number;
}

/** When each run was admitted and how it ended, in the order the journal recorded it. */
const timeline = async (runtime: Runtime, runIds: ReadonlyArray<string>) => {
  const marks: Array<{ position: number; line: string }> = [];
  for (const runId of runIds) {
    const inputId = (await runtime.run(runId))?.inputId;
    for (const { event, position } of await runtime.events(runId))
      if (["run.admitted", "run.completed", "run.cancelled"].includes(event.type))
        marks.push({ position, line: `${inputId} ${event.type}` });
  }
  return marks.sort((a, b) => a.position - b.position).map((m) => m.line);
};

const chatMessage = (inputId: string, request: string) =>
  ({ chatId: "chat-1", inputId, agent: "assistant", content: { request } }) as const;

export const aiSdkExample = async (dir: string): Promise<AiSdkStory> => {
  const killedBy = await runUntilKilled(dir);

  // A new process: recovery finds send_sms in doubt and holds the run.
  const { runtime, slowAnswer } = await open(dir);
  const { held } = await runtime.recover();
  const [run] = held;
  if (!run) throw new Error("recovery held nothing");

  // The chat is busy with the held run: the user's next messages wait in its queue, in order.
  // (`whenBusy: "interrupt"` would also cancel the active run, here stop the held one; the default
  // refuses with ActiveRunExists.)
  const porto = await runtime.submit({ ...chatMessage("message-2", "And in Porto?"), whenBusy: "queue" });
  const thanks = await runtime.submit({ ...chatMessage("message-3", "Thanks!"), whenBusy: "queue" });
  if (!porto.queued || !thanks.queued) throw new Error("the chat was free: nothing was queued");

  // A person looks at the outbox, sees the message went out, and says so.
  const events = await runtime.events(run.runId);
  const { result } = await runtime.decide(run.runId, {
    basedOnVersion: events.at(-1)?.version ?? 0,
    decidedBy: "ada",
    decision: "confirmed-completed",
    note: "the message is in the outbox",
    result: { sent: true, to: "+351 912 345 678" },
  });
  const completed = await result;

  // The run ended, so the next message was admitted. Its answer is slow; the user presses Stop.
  const portoRun = await porto.admitted;
  if (portoRun === null) throw new Error("message-2 was withdrawn");
  await slowAnswer;
  const cancel = await runtime.cancel(portoRun, { by: "user", note: "pressed Stop" });

  // The cancelled run frees the chat: the last message is admitted and answered.
  const thanksRun = await thanks.admitted;
  if (thanksRun === null) throw new Error("message-3 was withdrawn");
  const story = {
    killedBy,
    held,
    calls: (await runtime.calls(run.runId)).map((c) => `${c.name} #${c.attempt} ${c.status}`),
    positions: [porto.position, thanks.position],
    result: completed,
    cancel,
    stopped: await porto.result,
    thanked: await thanks.result,
    timeline: await timeline(runtime, [run.runId, portoRun, thanksRun]),
    outbox: lines(join(dir, "outbox.txt")),
    providerRequests: lines(join(dir, "provider.log")),
    auditFindings: (await runtime.audit()).findings.length,
  };
  await runtime.close();
  return story;
};

if (process.argv[2] === "child" && process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[3] ?? ".";
  const { runtime } = await open(dir);
  const run = await runtime.submit(chatMessage("message-1", "Text me today's weather in Lisbon"));
  await run.result; // never reached: the process dies inside send_sms
  await runtime.close();
}

// `npx tsx examples/ai-sdk.ts` runs the whole story in a fresh temporary folder and prints it.
if (process.argv[2] === undefined && process.argv[1] === fileURLToPath(import.meta.url)) {
  const { mkdtempSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(join(tmpdir(), "holdfast-ai-sdk-"));
  console.log(JSON.stringify(await aiSdkExample(dir), null, 2));
  console.log(`(journal and files in ${dir})`);
}
