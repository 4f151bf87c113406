import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { CallFailed } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const API_KEY = "k3y-Registered-Secret-9f8e7d6c";
const PASSWORD = "correct horse battery staple 42";
const TOKEN_SHAPED = "sk-ant-abcdefghijklmnopqrstuvwxyz0123456789";

/** Every byte holdfast left in the folder: the database, its WAL and shared-memory files. */
const rawBytes = (dir: string): Buffer =>
  Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f))));
const has = (bytes: Buffer, text: string): boolean => bytes.includes(Buffer.from(text, "utf8"));

describe("law 8 — secrets never reach disk", () => {
  it("the raw database and WAL bytes contain neither a registered secret nor a password argument", async () => {
    const dir = tempDir();
    const login = defineTool({
      name: "login",
      args: Schema.Struct({ user: Schema.String, password: Schema.String, note: Schema.String }),
      run: async ({ user }) => ({ session: `user ${user} with key ${API_KEY}`, token: "tok-123456789" }),
    });
    const leaky = defineTool({
      name: "leaky",
      args: Schema.Struct({ header: Schema.String }),
      run: async () => {
        throw new DefiniteFailure(`rejected key ${API_KEY}`, { echoed: TOKEN_SHAPED });
      },
    });
    const agent = defineAgent({
      name: "secretive",
      version: "1",
      run: async (turn, input: { ask: string }) => {
        const session = await turn.tool(login, { user: "ada", password: PASSWORD, note: `use ${API_KEY}` });
        await turn.checkpoint({ session, remember: API_KEY, password: PASSWORD });
        await turn.model("llm", { prompt: `Authorization: Bearer ${TOKEN_SHAPED}` }, async () => ({
          text: API_KEY,
        }));
        try {
          await turn.tool(leaky, { header: `Bearer ${TOKEN_SHAPED}` });
        } catch (error) {
          if (!(error instanceof CallFailed)) throw error;
        }
        return { echo: input.ask, session };
      },
    });
    const rt = await openRuntime({
      store: join(dir, "journal.db"),
      agents: [agent],
      tools: [login, leaky],
      secrets: { API_KEY },
    });
    const run = await rt.submit({
      chatId: "c",
      inputId: "i",
      agent: "secretive",
      content: { ask: `key is ${API_KEY}` },
    });
    const result = await run.result;
    expect(result.status).toBe("completed");

    // While open: the WAL holds the fresh pages.
    const whileOpen = rawBytes(dir);
    expect(readdirSync(dir).some((f) => f.endsWith("-wal"))).toBe(true);
    for (const secret of [API_KEY, PASSWORD, TOKEN_SHAPED]) expect(has(whileOpen, secret)).toBe(false);
    // The masked forms are there: the scan reads the right bytes.
    expect(has(whileOpen, "«secret:API_KEY»")).toBe(true);
    expect(has(whileOpen, "«secret:password»")).toBe(true);

    await rt.close();
    const afterClose = rawBytes(dir);
    for (const secret of [API_KEY, PASSWORD, TOKEN_SHAPED]) expect(has(afterClose, secret)).toBe(false);
  });
});
