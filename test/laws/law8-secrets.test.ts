import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { maskUrl } from "../../src/adapters/store.js";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { CallFailed } from "../../src/runtime/errors.js";
import { expectTwoLineError, runCli } from "../cli/cliProcess.js";
import { freshKey } from "../support/keys.js";
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

  it("F8: maskUrl masks by parsing: the password in the user-info (empty user, raw @) and secret query parameters; an unparseable URL is never printed", () => {
    expect(maskUrl("postgres://:s3cr3t-pw@db/x")).toBe("postgres://:****@db/x");
    expect(maskUrl("postgres://db/x?user=app&password=s3cr3t-pw")).toBe(
      "postgres://db/x?user=app&password=****",
    );
    expect(maskUrl("postgres://app:p@ss-s3cr3t@db/x")).toBe("postgres://app:****@db/x");
    expect(
      maskUrl("postgresql://app:pw-s3cr3t@db:5432/x?schema=hf&sslpassword=k3y-s3cr3t&sslmode=require"),
    ).toBe("postgresql://app:****@db:5432/x?schema=hf&sslpassword=****&sslmode=require");
    expect(maskUrl("https://api.example.com/v1?api_key=s3cr3t&token=s3cr3t&sig=s3cr3t&page=2")).toBe(
      "https://api.example.com/v1?api_key=****&token=****&sig=****&page=2",
    );
    // Nothing secret, or a file path: unchanged.
    for (const plain of [
      "postgres://app@db.internal:5432/agents?schema=holdfast",
      "/var/lib/holdfast/journal.db",
    ])
      expect(maskUrl(plain)).toBe(plain);
    for (const broken of [
      "postgres://app:s3cr3t@[::1/x",
      "postgres://app:s3cr3t@db:99999999/x",
      "postgres://app:s3cr3t@d b/x",
    ])
      expect(maskUrl(broken)).toBe("«unparseable url»");
  });

  it("F8: holdfast runs --db never prints a store URL's password, in the user-info or in ?password=", async () => {
    const urls = [
      "postgres://:s3cr3t-pw@127.0.0.1:1/x",
      "postgres://app@127.0.0.1:1/x?password=s3cr3t-pw",
      "postgres://app:p@ss-s3cr3t-pw@127.0.0.1:1/x",
    ];
    const results = await Promise.all(urls.map((url) => runCli(["runs", "--db", url])));
    for (const [i, result] of results.entries()) {
      expect(result.code, urls[i]).toBe(3);
      expect(result.stdout + result.stderr, urls[i]).not.toContain("s3cr3t-pw");
      // Still a useful message: it names where it tried.
      const { reason } = expectTwoLineError(result.stderr);
      expect(reason).toContain("127.0.0.1:1");
    }
  }, 60_000);

  it("F13: with HOLDFAST_ENCRYPTION_KEY set, a tool error (run.held reasons) and who decided are not in the raw database and WAL bytes", async () => {
    const dir = tempDir();
    const CARD = "4111-1111-1111-1111";
    const DECIDER = "ops-canary-decider-5e7a";
    process.env.HOLDFAST_ENCRYPTION_KEY = freshKey();
    try {
      const flaky = defineTool({
        name: "flaky",
        args: Schema.Struct({}),
        run: async () => {
          throw new Error(`card ${CARD} declined by gateway`);
        },
      });
      const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(flaky, {}) });
      const rt = await openRuntime({ store: join(dir, "journal.db"), agents: [agent], tools: [flaky] });
      const run = await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
      const held = await run.result;
      expect(held.status).toBe("held");
      // The reader with the key still sees the reason: sealing hides it from the disk only.
      expect(JSON.stringify(held)).toContain(CARD);
      const version = (await rt.events(run.runId)).length;
      await rt.decide(run.runId, {
        decision: "stop",
        basedOnVersion: version,
        decidedBy: DECIDER,
        note: "gave up",
      });
      expect(JSON.stringify(await rt.events(run.runId))).toContain(DECIDER);
      const whileOpen = rawBytes(dir);
      await rt.close();
      for (const bytes of [whileOpen, rawBytes(dir)]) {
        expect(has(bytes, CARD)).toBe(false);
        expect(has(bytes, DECIDER)).toBe(false);
      }
    } finally {
      delete process.env.HOLDFAST_ENCRYPTION_KEY;
    }
  });
});
