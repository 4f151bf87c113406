import { afterEach, describe, expect, it } from "vitest";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenServer } from "./given.js";

const tempDir = useTempDir();
let given: Given | null = null;
afterEach(async () => {
  await given?.close();
  given = null;
});

// biome-ignore lint/suspicious/noExplicitAny: replies are read as loosely as a client would read them
const body = async (response: Response) => (await response.json()) as Record<string, any>;

describe("the JSON API: a chat's queue", () => {
  it("lists the inputs queued behind a held run, withdraws one, says so again, refuses an unknown one", async () => {
    given = await givenServer(tempDir());
    const g = given;
    const { runId, chatId } = await g.submit("flaky");
    for (const inputId of ["m1", "m2"])
      await g.runtime.submit({ chatId, inputId, agent: "pair", content: null, whenBusy: "queue" });

    const listed = await g.request(`/api/chats/${chatId}/queue`);
    expect(listed.status).toBe(200);
    const queue = await body(listed);
    expect(queue.items.map((i: { inputId: string; position: number }) => [i.inputId, i.position])).toEqual([
      ["m1", 1],
      ["m2", 2],
    ]);
    expect(queue.waitingFor).toMatchObject({ runId, status: "held" });
    expect(queue.waitingFor.detail).toMatch(/^held: waiting for a decision/);

    const withdrawn = await g.json(`/api/chats/${chatId}/queue/m1/withdraw`, "POST", { by: "ada" });
    expect(withdrawn.status).toBe(200);
    expect(await body(withdrawn)).toMatchObject({ chatId, inputId: "m1", withdrawn: true });
    const again = await g.json(`/api/chats/${chatId}/queue/m1/withdraw`, "POST", { by: "ada" });
    expect(await body(again)).toMatchObject({ withdrawn: false });
    const unknown = await g.json(`/api/chats/${chatId}/queue/nope/withdraw`, "POST", { by: "ada" });
    expect(unknown.status).toBe(404);
    expect((await body(unknown)).error.code).toBe("queued-input-not-found");
    const nobody = await g.json(`/api/chats/${chatId}/queue/m2/withdraw`, "POST", { by: " " });
    expect(nobody.status).toBe(422);

    const after = await body(await g.request(`/api/chats/${chatId}/queue`));
    expect(after.items.map((i: { inputId: string }) => i.inputId)).toEqual(["m2"]);
  });

  it("the panel shows the queue on the held run's page; withdraw asks to confirm, needs the CSRF token, then records", async () => {
    given = await givenServer(tempDir());
    const g = given;
    const { runId, chatId } = await g.submit("flaky");
    await g.runtime.submit({ chatId, inputId: "m1", agent: "pair", content: null, whenBusy: "queue" });
    const session = await g.login("ada");
    const browse = (path: string, init: RequestInit = {}) =>
      g.request(path, {
        ...init,
        auth: "none",
        headers: {
          host: g.panelHost,
          origin: `http://${g.panelHost}`,
          cookie: session.cookie,
          "content-type": "application/x-www-form-urlencoded",
        },
      });
    const page = await (await browse(`/runs/${runId}`)).text();
    expect(page).toContain(`1 input queued in chat <span class="mono">${chatId}</span>`);
    expect(page).toContain("They wait for this run: held: waiting for a decision");
    const action = `/chats/${encodeURIComponent(chatId)}/queue/m1/withdraw`;
    expect(page).toContain(`action="${action}"`);

    const noCsrf = await browse(action, { method: "POST", body: "confirm=yes" });
    expect(noCsrf.status).toBe(403);
    const confirm = await browse(action, {
      method: "POST",
      body: `_csrf=${encodeURIComponent(session.csrf)}`,
    });
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain("Withdraw a queued input?");
    expect((await g.runtime.queue(chatId)).items).toHaveLength(1);

    const done = await browse(action, {
      method: "POST",
      body: `_csrf=${encodeURIComponent(session.csrf)}&confirm=yes`,
    });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain(`Recorded: input m1 of chat ${chatId} was withdrawn.`);
    expect((await g.runtime.queue(chatId)).items).toEqual([]);
    const again = await (await browse(`/runs/${runId}`)).text();
    expect(again).not.toContain("queued in chat");
  });
});
