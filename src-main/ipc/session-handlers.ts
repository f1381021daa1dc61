// The channel table of the API: each channel of the contract (src-shared/contract.ts) mapped to
// the AppSession method that answers it, for the dispatcher (dispatch.ts). It lives here, beside the
// dispatcher, so that the services (src-main/services/) know nothing of how they are called: the
// worker process (src-main/utility/host.ts) and the web host's in-process session
// (src-main/web/server.ts) take their handlers from it.
import { AppSession, DEFAULT_PAGE } from '../services/app-session.ts'
import type { Handlers } from './dispatch.ts'

/**
 * The session as the dispatcher's handlers: one per channel of the contract, given its checked
 * argument, for calls from `page` (what they open is that page's). The web host serves them all;
 * the desktop app's worker process those that run there.
 */
export function sessionHandlers(session: AppSession, page = DEFAULT_PAGE): Handlers {
  return {
    'app:info': () => session.info(),
    'trace:openSample': ({ name }) => session.openSample(name, page),
    'trace:openPath': ({ path }) => session.openPath(path, page),
    'trace:openBytes': ({ name, bytes }) => session.openBytes(name, bytes, page),
    'trace:openRecent': ({ key }) => session.openRecent(key, page),
    'trace:recent': () => session.recentFiles(),
    'trace:data': ({ traceId }) => session.traceData(traceId),
    'trace:close': ({ traceId }) => session.closeTrace(traceId),
    'page:alive': () => ({ ok: true }),
    'page:close': () => (page === DEFAULT_PAGE ? { closed: 0 } : session.closePage(page)),
    'replay:start': (request) => session.startReplay(request, page),
    'replay:result': ({ jobId, strategy, preview, wait }) => session.replayResult(jobId, strategy, preview, wait),
    'whatif:start': (request) => session.startWhatif(request, page),
    'whatif:result': ({ jobId }) => session.whatifResult(jobId),
    'ranks:stage': ({ name, bytes }) => session.stageRankFile(name, bytes, page),
    'ranks:open': ({ keys }) => session.openRanks(keys, page),
    'ranks:openInitial': () => session.openInitialRanks(page),
    'ranks:result': ({ jobId }) => session.ranksResult(jobId),
    'ranks:openRank': ({ ranksId, rank }) => session.openRank(ranksId, rank, page),
    'ranks:whatif': (request) => session.startRanksWhatif(request, page),
    'ranks:whatifResult': ({ jobId }) => session.ranksWhatifResult(jobId),
    'record:workload': (request) => session.recordWorkload(request, page),
    'record:pytorch': (request) => session.recordPytorchProgram(request, page),
    'job:status': ({ jobId, waitMs }) => session.jobStatus(jobId, waitMs),
    'job:result': ({ jobId }) => session.jobResult(jobId),
    'job:cancel': ({ jobId }) => session.jobs.cancel(jobId),
  }
}
