/** The project's timeout for every test and hook (jest.config.js sets TEST_TIMEOUT_MS per project). */
declare const TEST_TIMEOUT_MS: number;

jest.setTimeout(TEST_TIMEOUT_MS);
