// The address bar names the open chat (?session=<id>): a reload or a bookmark reopens it. This is
// the js_on_load of the hidden block holding the open chat's id (sid_box in webui/gui/app.py), an
// output of every answer that shows a chat (a row, a search hit, New chat, a branch, a delete, the
// page's load, the live check). `watch` runs in the task that applies that answer, right after the
// page's components are given its values: the address changes before the frame showing the chat is
// painted (the Chatbot draws its messages a few ms later, in that frame on an idle machine). It was
// a listener of a hidden Textbox's change event, which Gradio's page dispatches only after the
// answer is drawn, through a chain of its own steps: the chat was on screen with the old address
// 4-40 ms here, 1-3 s in a fresh-user trial on a busy machine, and a reload then reopened the chat
// before. replaceState: switching chats should not fill the back button's history.
const sync = () => {
  const sid = props.value || '';
  const url = new URL(window.location.href);
  if (sid) { url.searchParams.set('session', sid); } else { url.searchParams.delete('session'); }
  if (url.toString() !== window.location.href) {
    window.history.replaceState(null, '', url.toString());
    // the chat shown changed: its draft is put in the box at once (drafts.js), before more typing
    window.dispatchEvent(new Event('ac-chat-shown'));
  }
};
watch('value', sync);
// A link naming a chat that cannot be opened (?session=<unknown id>): the load's answer shows a
// new chat with a sentence, and this block's value stays '' (no change to watch), so the address
// kept the id and a reload said the same again. Once that answer is drawn, the address follows.
if (window.acPageLoaded === true) { sync(); } else { window.addEventListener('ac-page-loaded', sync, { once: true }); }
