// The README's example, compiled and run by test/examples.test.ts.
import { pathToFileURL } from "node:url";
import { Schema } from "effect";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../src/index.js";

export const sendEmail = defineTool({
  name: "send_email",
  args: Schema.Struct({ to: Schema.String, subject: Schema.String }),
  // disposition "hold" (the default): if a crash leaves this call in doubt, a person decides.
  run: async ({ to, subject }, { idempotencyKey }) => {
    if (!to.includes("@")) throw new DefiniteFailure(`not an address: ${to}`); // provably not sent
    return { queued: true, to, subject, idempotencyKey };
  },
});

export const assistant = defineAgent({
  name: "assistant",
  version: "1",
  run: async (turn, input: { request: string }) => {
    const plan = await turn.model("planner", { prompt: input.request }, async () => ({
      to: "ada@example.com",
      subject: "Your report",
    }));
    await turn.checkpoint({ plan });
    const sent = await turn.tool(sendEmail, plan);
    return { sent };
  },
});

export const quickstart = async (store?: string) => {
  const runtime = await openRuntime({
    ...(store === undefined ? {} : { store }), // a libSQL file; default .holdfast/journal.db
    agents: [assistant],
    tools: [sendEmail],
    secrets: { SMTP_PASSWORD: process.env.SMTP_PASSWORD ?? "not-a-real-password" },
  });
  const run = await runtime.submit({
    chatId: "chat-42",
    inputId: "message-1", // the same ids and content again return the same run: no new work
    agent: "assistant",
    content: { request: "email Ada her report" },
  });
  const result = await run.result; // { status: "completed", output: { sent: { queued: true, … } } }
  await runtime.close();
  return result;
};

// `npx tsx examples/quickstart.ts` runs it on the default journal and prints the result; run it
// again and the same run is returned (`submit` is idempotent).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await quickstart(), null, 2));
}
