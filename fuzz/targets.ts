import type { FuzzTarget } from "./target.js";
import { apiTarget } from "./targets/api.js";
import { cliTarget } from "./targets/cli.js";
import { decoderTarget } from "./targets/decoder.js";
import { httpTarget } from "./targets/http.js";
import { maskerTarget } from "./targets/masker.js";

/** Every target, cheap ones first. */
export const TARGETS: ReadonlyArray<FuzzTarget> = [
  decoderTarget,
  maskerTarget,
  apiTarget,
  cliTarget,
  httpTarget,
];
