import {
  RUN_MACHINE_V1,
  RUN_MACHINE_V2,
  RUN_MACHINE_VERSION,
  type RunMachine,
  runMachineV1,
  runMachineV2,
} from "./run.js";

/**
 * Every run-machine version still present in stored logs. A run folds through the version recorded
 * in its `run.admitted`, so changing behaviour means adding a version here, never editing one.
 */
export const runMachines: Readonly<Record<string, RunMachine>> = {
  [RUN_MACHINE_V1]: runMachineV1,
  [RUN_MACHINE_V2]: runMachineV2,
};

export const CURRENT_RUN_MACHINE = RUN_MACHINE_VERSION;

/** The machine of a recorded version; undefined for a version this holdfast does not know. */
export const runMachineFor = (version: string): RunMachine | undefined =>
  Object.hasOwn(runMachines, version) ? runMachines[version] : undefined;
