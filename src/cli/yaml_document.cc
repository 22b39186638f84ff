#include "cli/yaml_document.h"

#include <memory>

namespace reliableq::cli {

namespace {

// libyaml's own words, with the line they are about.
Status ParseError(const yaml_parser_t& parser) {
  std::string what = parser.problem != nullptr ? parser.problem : "unreadable";
  if (parser.context != nullptr) what += std::string(" ") + parser.context;
  return Status::InvalidArgument(std::to_string(parser.problem_mark.line + 1) +
                                 ": not YAML: " + what);
}

// Refuses a collection nested deeper than kMaxYamlDepth at the event that
// opens it, before libyaml reads further: its scanner looks at every open
// flow level for each token, so a file nested 100,000 deep cost 26 s of CPU
// before its error. Anything else libyaml refuses is left to Load.
Status CheckDepth(std::string_view text) {
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) {
    return Status::InvalidArgument("cannot start the YAML parser");
  }
  std::unique_ptr<yaml_parser_t, decltype(&yaml_parser_delete)> owner(&parser,
                                                                       &yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  int depth = 0;
  for (;;) {
    yaml_event_t event;
    if (yaml_parser_parse(&parser, &event) == 0) return Status::OK();
    yaml_event_type_t type = event.type;
    size_t line = event.start_mark.line + 1;
    yaml_event_delete(&event);
    if (type == YAML_STREAM_END_EVENT) return Status::OK();
    if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
      if (++depth > kMaxYamlDepth) {
        return Status::InvalidArgument(std::to_string(line) + ": nested deeper than " +
                                       std::to_string(kMaxYamlDepth) + " levels");
      }
    } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
      --depth;
    }
  }
}

}  // namespace

bool YamlNode::IsNull() const {
  if (node_ == nullptr) return true;
  if (!IsScalar() || node_->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  std::string text = Scalar();
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

std::string YamlNode::Scalar() const {
  if (!IsScalar()) return "";
  return std::string(reinterpret_cast<const char*>(node_->data.scalar.value),
                     node_->data.scalar.length);
}

YamlNode YamlNode::Node(int index) const {
  return YamlNode(document_, yaml_document_get_node(document_, index));
}

std::vector<YamlNode> YamlNode::Items() const {
  std::vector<YamlNode> items;
  if (!IsSequence()) return items;
  for (yaml_node_item_t* item = node_->data.sequence.items.start;
       item < node_->data.sequence.items.top; ++item) {
    items.push_back(Node(*item));
  }
  return items;
}

std::vector<std::pair<YamlNode, YamlNode>> YamlNode::Pairs() const {
  std::vector<std::pair<YamlNode, YamlNode>> pairs;
  if (!IsMapping()) return pairs;
  for (yaml_node_pair_t* pair = node_->data.mapping.pairs.start;
       pair < node_->data.mapping.pairs.top; ++pair) {
    pairs.emplace_back(Node(pair->key), Node(pair->value));
  }
  return pairs;
}

Result<std::unique_ptr<YamlDocument>> YamlDocument::Load(std::string_view text) {
  if (Status depth = CheckDepth(text); !depth.ok()) return depth;
  std::unique_ptr<YamlDocument> document(new YamlDocument());
  if (yaml_parser_initialize(&document->parser_) == 0) {
    return Status::InvalidArgument("cannot start the YAML parser");
  }
  document->parser_ready_ = true;
  yaml_parser_set_input_string(&document->parser_,
                               reinterpret_cast<const unsigned char*>(text.data()), text.size());
  if (yaml_parser_load(&document->parser_, &document->document_) == 0) {
    return ParseError(document->parser_);
  }
  document->document_ready_ = true;
  // A second document (after "---") would be left unread: refuse it.
  yaml_document_t next;
  if (yaml_parser_load(&document->parser_, &next) == 0) return ParseError(document->parser_);
  bool more = yaml_document_get_root_node(&next) != nullptr;
  int line = static_cast<int>(next.start_mark.line) + 1;
  yaml_document_delete(&next);
  if (more) {
    return Status::InvalidArgument(std::to_string(line) +
                                   ": a second YAML document; a config file holds one");
  }
  return document;
}

YamlDocument::~YamlDocument() {
  if (document_ready_) yaml_document_delete(&document_);
  if (parser_ready_) yaml_parser_delete(&parser_);
}

YamlNode YamlDocument::Root() {
  return YamlNode(&document_, yaml_document_get_root_node(&document_));
}

}  // namespace reliableq::cli
