//! Function calls in a response: the GA sequence for each call a model makes
//! (`response.output_item.added` with the `function_call` item, `conversation.item.added`,
//! `response.function_call_arguments.delta` …, `.done`, `response.output_item.done`,
//! `conversation.item.done`), and the message item that a response which may call a tool
//! opens only when the model speaks or writes.

use duet_models::ToolCallDelta;

use super::reply::{Cx, Reply};
use super::response::FunctionCall;
use crate::protocol::{ids, ItemStatus, ServerEventBody};

impl Reply {
    /// A step's piece of a tool call: opens the call's item on its first piece (closing the
    /// call before it), then streams its arguments.
    pub(super) fn stream_call(&mut self, cx: &mut Cx<'_>, d: &ToolCallDelta) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let same = a
            .open_call()
            .is_some_and(|c| d.call_id.is_empty() || c.call_id == d.call_id);
        if !same {
            self.close_call(cx, ItemStatus::Completed);
            self.open_call(cx, d);
        }
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let response_id = a.response.id.clone();
        let Some(call) = a.open_call() else { return };
        if d.arguments.is_empty() {
            return;
        }
        call.arguments.push_str(&d.arguments);
        let event = ServerEventBody::ResponseFunctionCallArgumentsDelta {
            response_id,
            item_id: call.item_id.clone(),
            output_index: call.output_index,
            call_id: call.call_id.clone(),
            delta: d.arguments.clone(),
        };
        cx.out.emit(event);
    }

    /// Opens a call's `function_call` item: in the output, and in the conversation.
    fn open_call(&mut self, cx: &mut Cx<'_>, d: &ToolCallDelta) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let call = FunctionCall {
            item_id: ids::item_id(),
            call_id: if d.call_id.is_empty() {
                ids::call_id()
            } else {
                d.call_id.clone()
            },
            name: d.name.clone(),
            arguments: String::new(),
            output_index: a.next_index,
            done: false,
            status: ItemStatus::InProgress,
        };
        a.next_index += 1;
        let item = call.item(ItemStatus::InProgress);
        let (response_id, output_index) = (a.response.id.clone(), call.output_index);
        let in_conversation = a.in_conversation;
        a.calls.push(call);
        cx.out.emit(ServerEventBody::ResponseOutputItemAdded {
            response_id,
            output_index,
            item: Box::new(item.clone()),
        });
        if in_conversation {
            match cx.conv.append(item) {
                Ok(events) => cx.out.emit_all(events),
                Err(e) => cx.out.error(e),
            }
        }
    }

    /// Closes the call receiving arguments, if any: its arguments are complete (`status`
    /// completed) or the response ended first (incomplete).
    pub(super) fn close_call(&mut self, cx: &mut Cx<'_>, status: ItemStatus) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let response_id = a.response.id.clone();
        let in_conversation = a.in_conversation;
        let Some(call) = a.open_call() else { return };
        call.done = true;
        call.status = status;
        let item = call.item(status);
        let done = ServerEventBody::ResponseFunctionCallArgumentsDone {
            response_id: response_id.clone(),
            item_id: call.item_id.clone(),
            output_index: call.output_index,
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        };
        let output_index = call.output_index;
        let item_id = call.item_id.clone();
        cx.out.emit(done);
        cx.out.emit(ServerEventBody::ResponseOutputItemDone {
            response_id,
            output_index,
            item: Box::new(item.clone()),
        });
        if in_conversation && cx.conv.finish_item(&item_id, item.clone(), None) {
            let prev = cx.conv.previous_id(&item_id);
            cx.out.emit(ServerEventBody::ConversationItemDone {
                previous_item_id: prev,
                item: Box::new(item),
            });
        }
    }

    /// Opens the response's message item (at once, or when a deferred one's model first
    /// speaks or writes): the output item, its place in the conversation, `response.speak`
    /// when an autonomous model is already `speaking` it, and its content part.
    pub(super) fn open_message(&mut self, cx: &mut Cx<'_>, speaking: bool) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        a.open_message();
        let empty = a.empty_item();
        let (response_id, at) = (a.response.id.clone(), a.at());
        let in_conversation = a.in_conversation;
        cx.out.emit(ServerEventBody::ResponseOutputItemAdded {
            response_id,
            output_index: at.output_index,
            item: Box::new(empty.clone()),
        });
        if in_conversation {
            match cx.conv.append(empty) {
                Ok(events) => cx.out.emit_all(events),
                Err(e) => cx.out.error(e),
            }
        }
        if speaking {
            self.floor.speak_deadline = None;
            let (id, epoch) = (cx.cfg.id.clone(), self.model.epoch);
            if let Some(speak) = self.active.as_mut().map(|a| a.speak(&id, epoch)) {
                cx.out.emit(speak);
            }
        }
        if let Some(part) = self.active.as_ref().map(|a| a.part()) {
            cx.out
                .emit(ServerEventBody::ResponseContentPartAdded { at, part });
        }
    }
}
