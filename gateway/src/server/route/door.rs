//! The door of the route table: one request as it reaches the answerers (its context,
//! caller and plan, made once), and what an answerer makes of it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::future::{Either, ready};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;

use crate::node::multiplexer::SharedBody;
use crate::reply::ResponseBody;
use crate::request::RequestContext;
use crate::server::caller::Caller;
use crate::server::plan::Plan;
use crate::server::proxy_error::ProxyError;
use crate::server::state::State;
use crate::server::{respond, upgrade};

/// The component the gateway's own clients are (`edgegate/VERSION PURPOSE`).
pub(crate) const OWN_COMPONENT: &str = "edgegate";

/// One request as the door made it: what every answerer reads.
pub(crate) struct Door<'a> {
    /// What every request is served with.
    pub(crate) state: &'a Arc<State>,
    /// What the request is, cached for its caller's partition.
    pub(crate) context: RequestContext,
    /// Who sent it.
    pub(crate) caller: Caller,
    /// What its response passes (filters, the cache); `None` for non-resource requests and
    /// upgrades.
    pub(crate) plan: Option<Plan>,
    /// Where it came from.
    pub(crate) peer: SocketAddr,
}

/// What an answerer made of a request.
pub(crate) enum Turn {
    /// It answered.
    Answered(Answer),
    /// Not its to answer: the request, for the next.
    Next(Request<Incoming>),
}

/// An answer, and what it still passes on its way to the client.
pub(crate) enum Answer {
    /// Finished: the local proxy's answers.
    Done(Response<ResponseBody>),
    /// An apiserver's or a pool leader's response, sent through the plan.
    Forwarded(Response<Incoming>),
    /// The multiplexer's response, sent through the plan as it serves (nothing cached).
    Shared(Response<SharedBody>),
    /// An apiserver's answer to an upgrade: the client's connection is spliced to it.
    Upgraded(Response<Incoming>, OnUpgrade),
}

impl Door<'_> {
    /// Whether the request may be answered from the cache: always for the node's components;
    /// a caller with its own credentials only on a token the apiserver was seen to accept.
    pub(crate) fn may_answer_offline(&self) -> Result<(), ProxyError> {
        match &self.caller {
            Caller::Node => Ok(()),
            Caller::Own(own) => self.state.known.answers_offline(own),
        }
    }

    /// Whether the request comes from the node's components (not the HTTPS proxy's callers).
    pub(crate) fn is_node_caller(&self) -> bool {
        matches!(self.caller, Caller::Node)
    }

    /// The client's response to `answer`, which takes the plan. One future of either kind
    /// of response, not an `async fn`: its two awaits would each keep room for a whole
    /// response's future.
    pub(crate) fn respond(
        &mut self,
        answer: Answer,
    ) -> impl Future<Output = Result<Response<ResponseBody>, ProxyError>> + Send + '_ {
        let (state, plan, context) = (self.state, self.plan.take(), &self.context);
        match answer {
            Answer::Done(response) => Either::Left(ready(Ok(response))),
            Answer::Upgraded(response, client) => {
                Either::Left(ready(Ok(upgrade::tunnel(client, response))))
            }
            Answer::Forwarded(response) => Either::Right(Either::Left(respond::respond(
                state, context, plan, response,
            ))),
            Answer::Shared(response) => {
                let plan = plan.and_then(Plan::served);
                Either::Right(Either::Right(respond::respond(
                    state, context, plan, response,
                )))
            }
        }
    }

    /// For a response filters will judge, a wait until the informers behind their lookups
    /// have synced or start-up is over ([`crate::node::informer::Informers::until_synced`]); none
    /// for the gateway's own clients, which the informers are.
    pub(crate) fn until_lookups_synced(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        let own = self.is_node_caller() && self.context.component == OWN_COMPONENT;
        let filtered = self
            .plan
            .as_ref()
            .is_some_and(|plan| plan.session.is_some());
        if own || !filtered {
            return None;
        }
        self.state.informers.as_ref()?.until_synced()
    }
}
