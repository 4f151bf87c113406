import { afterAll, beforeAll } from "vitest";
import { HoldfastSaver } from "../../src/langgraph.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { validateSaver } from "./validation.js";

const schemas = usePgSchemas();
beforeAll(() => requirePg());
afterAll(() => schemas.dropAll());

await validateSaver("HoldfastSaver (PostgreSQL)", () =>
  HoldfastSaver.open({ store: pgUrl(schemas.fresh()) }),
);
